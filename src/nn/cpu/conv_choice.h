/* The CPU backend a --conv choice names, above the backends it chooses between. */
#ifndef MNIST_CONV_CHOICE_H
#define MNIST_CONV_CHOICE_H
#include "nn/backend.h"

/* im2col (nn_cpu), onednn, winograd, wino43 (conv_onednn.h), auto (wino43 where built with oneDNN, else im2col);
 * NULL for another name, or a oneDNN choice in a build without it. */
const nn_backend *nn_cpu_conv(const char *conv);
#endif
