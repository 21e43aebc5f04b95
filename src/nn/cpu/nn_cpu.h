/* The CPU backend (nn_cpu of backend.h): CBLAS gemm plus these primitives, thin loops over the ops.h
 * element functions, named like their CUDA twins (cu_* in src/gpu/cuda/nn_cuda.cu). Layouts and gradient
 * conventions are those of layers.h. The model reaches them only through nn_cpu; tests call them
 * directly. */
#ifndef MNIST_NN_CPU_H
#define MNIST_NN_CPU_H
#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

/* uint8 pixels -> normalised floats (op_normalize). For tests, benchmarks and the PyTorch reference: the
 * trainer normalises while it gathers (cpu_gather). */
void cpu_normalize(const uint8_t *images, size_t count, float *x);
/* Sample i of a batch is idx[i] (idx NULL: i) of images [][784] / labels: x [n][784] normalised, and
 * y[i] its label unless y is NULL. */
void cpu_gather(const uint8_t *images, const uint8_t *labels, const uint64_t *idx, int n, float *x, uint8_t *y);

/* The convolution's and linear layer's primitives (semantics in backend.h). */
void cpu_im2col(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
void cpu_col2im(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
void cpu_fill(float *y, const float *b, int rows, size_t cols, size_t ld, int by_row);
void cpu_sum_add(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride);

void cpu_relu_forward(float *x, size_t count); /* in place */
/* In place on x [C][count]: x = relu(x + b[c]). */
void cpu_bias_relu_forward(float *x, const float *b, int C, size_t count);
void cpu_relu_backward(float *dy, const float *y, size_t count); /* in place, y = the ReLU's output */
/* dw[0..nw), db[0..nb) += a convolution's sums of them (layers.h: backward adds parameter gradients). */
void cpu_add_grads(float *dw, float *db, const float *dw_sum, const float *db_sum, size_t nw, int nb);

/* 2x2 max-pool, stride 2, over `planes` planes [H][ld] (W <= ld used columns) -> [H/2][W/2];
 * arg: argmax plane index. Backward writes every element of dx, 0 outside the argmaxes. The unfused
 * reference the tests hold the fused entries below to: the models call those. */
void cpu_maxpool2_forward(const float *x, float *y, int32_t *arg, int planes, int H, int W, int ld);
void cpu_maxpool2_backward(const float *dy, const int32_t *arg, float *dx, int planes, int H, int W, int ld);

/* Dropout in place on x [N][D]; element e of sample i is kept iff the counter-based draw for
 * (key, ids[i], layer, e) is >= p; mask records the multipliers (0 or 1/(1-p)) for backward. */
void cpu_dropout_forward(float *x, float *mask, int N, int D, const uint64_t *ids, uint64_t key, int layer, float p);
void cpu_dropout_backward(float *dy, const float *mask, size_t count);

/* CNHW [C][N][HW] <-> per-sample [N][C*HW] (PyTorch's flatten order c, h, w). */
void cpu_flatten_cnhw(const float *x, float *y, int C, int N, int HW);
void cpu_unflatten_cnhw(const float *y, float *x, int C, int N, int HW);

/* The fused entries of backend.h (maxpool2_relu_forward etc.): the same bits as the pairs above. */
void cpu_maxpool2_relu_forward(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                               int ld);
void cpu_relu_maxpool2_backward(float *dy, const float *y, const int32_t *arg, float *dx, int planes, int H, int W,
                                int ld);
void cpu_flatten_dropout_forward(const float *x, float *y, float *mask, int C, int N, int HW, const uint64_t *ids,
                                 uint64_t key, int layer, float p);
void cpu_dropout_unflatten_backward(float *dy, const float *mask, float *dx, int C, int N, int HW);

/* BatchNorm2d on x [C][count] (count = N*H*W). Training mode: batch statistics, saves mean and
 * invstd per channel, updates running stats (unbiased variance) with momentum, and adds 1 to *tracked
 * (num_batches_tracked). */
void cpu_batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                                 float *invstd, float *running_mean, float *running_var, float *tracked, int C,
                                 size_t count, float momentum, float eps);
void cpu_batchnorm_forward_eval(const float *x, const float *gamma, const float *beta, const float *running_mean,
                                const float *running_var, float *y, int C, size_t count, float eps);
void cpu_batchnorm_backward(const float *x, const float *dy, const float *gamma, const float *mean, const float *invstd,
                            float *dx, float *dgamma, float *dbeta, int C, size_t count);

/* Log-softmax + NLL over z [N][K]: writes logp and the per-sample losses loss [N]. */
void cpu_log_softmax_nll_forward(const float *z, const uint8_t *labels, float *logp, float *loss, int N, int K);
/* Sum of loss [N], in double. */
double cpu_sum_losses(const float *loss, int N);
void cpu_add_losses(const float *loss, int N, double *sum);
/* dz = gradient of g * (sum of losses). */
void cpu_log_softmax_nll_backward(const float *logp, const uint8_t *labels, float *dz, int N, int K, float g);
long cpu_count_correct(const float *z, const uint8_t *labels, int N, int K);

/* Optimizer updates over n parameters (op_adadelta / op_sgd of ops.h); unless clear is NULL (then grad), each
 * gradient zeroed once read. */
void cpu_adadelta_step(float *param, const float *grad, float *square_avg, float *acc_delta, size_t n, float lr,
                       float rho, float eps, float weight_decay, float *clear);
void cpu_sgd_step(float *param, const float *grad, float *buf, size_t n, float lr, float momentum, float weight_decay,
                  float *clear);
#endif
