/* net's conv1 and conv2 with its pool, sample by sample (backend.h's conv_stack_forward and conv_stack_backward
 * on wino43's backend):
 * - conv1_direct.h writes a sample's conv1 output straight in 16-channel blocks, h1's layout here
 *   ([N][F1/16][H-2][W-2][16]), which wino43.h convolves and nchw16c.h pools while they are in cache.
 * - The backward reads those blocks for conv2's weight gradient and conv1's ReLU, and conv1's weight gradient
 *   takes conv2's input gradient from the part's scratch.
 * No tensor is converted between layouts and conv1's output gradient never reaches memory. Values as the
 * composition of wino43_pool.h with conv1_direct.h: the same bits forward, and for conv2's gradients; conv1's
 * gradients summed in another order. */
#ifndef MNIST_WINO43_STACK_H
#define MNIST_WINO43_STACK_H
#include "nn/conv_stack.h"

/* 1 having run, 0 having done nothing for a shape or CPU it does not take (the same ones both ways). */
int wino43_stack_forward(const nn_conv_stack *s);
int wino43_stack_backward(const nn_conv_stack *s);
#endif
