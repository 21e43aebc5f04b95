/* net's two convolutions as one unit (backend.h's conv_stack_forward, conv_stack_backward), for a backend that
 * runs them sample by sample while a sample's activations are in cache:
 * - forward: conv1 (one input channel) with its bias and ReLU into h1, then conv2 with its max-pool, bias and
 *   ReLU into py and arg, as layers.h's conv_bias_relu_forward then conv_pool_forward;
 * - backward: from the pool's output gradient dpy, all four parameter gradients added to (as layers.h's
 *   backward passes do); conv1's input gradient is not computed.
 * h1 holds conv1's output in a layout of the backend's own, which only its conv_stack_backward reads. */
#ifndef MNIST_CONV_STACK_H
#define MNIST_CONV_STACK_H
#include <stdint.h>

typedef struct {
    const float *x;       /* [N][H][W]: the images */
    const float *w1, *b1; /* conv1 [F1][1][k][k], [F1] */
    float *h1;            /* F1 * N * (H-k+1) * (W-k+1) floats */
    const float *w2, *b2; /* conv2 [F2][F1][k][k], [F2] (b2 after the pool) */
    float *py;            /* [F2][N][PH][PW], the pool's output */
    int32_t *arg;         /* its argmaxes, as conv_pool_forward gives them (conv2's rows ld2 long) */
    float *dpy;           /* backward: the gradient of py (may be overwritten) */
    float *dw1, *db1, *dw2, *db2;
    int N, H, W, F1, F2, k, ld2;
    const char *phase1, *phase2; /* --profile's phases of conv1's and conv2's work (NULL: not timed) */
    void (*poll)(void *ctx);     /* model.h's grad_poll_fn, called between samples of the backward (NULL: none) */
    void *poll_ctx;
    const char *phase_poll; /* --profile's phase of the time in poll */
} nn_conv_stack;
#endif
