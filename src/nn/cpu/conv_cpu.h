/* The CPU backend's own whole convolutions (backend.h's conv_forward / conv_backward, layers.h's semantics)
 * for layers whose per-sample products are too small for gemm.c to share among threads (net's and
 * convnet's conv1). With --threads > 1 the samples are shared instead. 0, having done nothing, for one
 * thread and larger layers (layers.c's loop then). A forward and the backward that follows run with the
 * same thread count, as the model runs them. */
#ifndef MNIST_CONV_CPU_H
#define MNIST_CONV_CPU_H
#include "nn/backend.h"

/* be: the CPU backend the call came through (nn_cpu or a oneDNN copy of it), whose primitives run each sample. */
int cpu_conv_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C,
                     int H, int W, int F, int k, int pad, int wide);
int cpu_conv_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                      float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide);
#endif
