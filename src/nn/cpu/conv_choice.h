/* The CPU backend a --conv choice names, above the backends it chooses between. */
#ifndef MNIST_CONV_CHOICE_H
#define MNIST_CONV_CHOICE_H
#include "nn/backend.h"

/* im2col (nn_cpu), onednn, winograd, wino43 (conv_onednn.h; nn_cpu_own without oneDNN), auto (wino43 where
 * built with oneDNN or where the CPU runs the own kernels, else im2col); NULL for another name, or onednn and
 * winograd in a build without oneDNN. */
const nn_backend *nn_cpu_conv(const char *conv);
/* Without oneDNN: nn_cpu with net's convolutions and pool as wino43's stack (wino43_stack.h), one call each
 * way; the shapes it declines, and other models, as im2col. */
const nn_backend *nn_cpu_own(void);
#endif
