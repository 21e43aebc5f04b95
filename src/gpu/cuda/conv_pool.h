// net's conv2 with its pool both ways without a column buffer (MNIST_DDP_CONV2=direct or 3xtf32): backend.h's
// conv_pool_forward and pool_conv_backward on the GPU, kernels over src/gpu/conv_pool_kernels.h and conv_pool_tf32.h.
#ifndef MNIST_CUDA_CONV_POOL_H
#define MNIST_CUDA_CONV_POOL_H
#include <cstdint>
extern "C" {
#include "nn/backend.h"
}

// The weight gradient's partials (once, before any capture: nn_cuda with the switch).
void cu_conv_pool_alloc(void);
// Every call of that shape with 1..N samples is taken (backend.h's conv_pool_covers).
int cu_conv_pool_covers(int N, int C, int H, int W, int F, int k, int pad, int wide);
// The forward and input gradient's products: fp32 FFMA, one TF32 product per pair on the tensor cores (--precision
// tf32), or three (3xTF32, MNIST_DDP_CONV2=3xtf32), the latter two where conv_pool_tf32.h's tiles fit the shape.
enum { CP_FP32, CP_TF32, CP_3XTF32 };
template <int MODE>
int cu_conv_pool_forward(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                         const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad, int wide);
template <int MODE>
int cu_pool_conv_backward(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg, const float *x,
                          const float *x_relu, const float *w, float *dw, float *db, float *dx, int N, int C, int H,
                          int W, int F, int k, int pad, int wide);
#endif
