/* Layer kernels: thin loops over the ops.h element functions, on raw pointers and sizes.
 * Layouts: convolution activations are channel-major [C][N][H][W] ("CNHW"), so per-channel work
 * (bias, BatchNorm, pooling, ReLU) runs on contiguous planes and a convolution over any run of
 * samples is one GEMM; fully connected activations are [N][F]. Backward functions ADD parameter gradients
 * (dw, db, dgamma, dbeta) and SET input gradients. */
#ifndef MNIST_LAYERS_H
#define MNIST_LAYERS_H
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* Marks a CPU loop whose iterations are independent, to be vectorised where OpenMP is enabled
 * (without it the loop stays correct, just scalar). */
#ifdef _OPENMP
#define SIMD _Pragma("omp simd")
#else
#define SIMD
#endif

/* All model and optimizer memory comes from here, so a device backend can swap it. */
void *nn_alloc(size_t bytes);
void nn_free(void *p);

void normalize_images(const uint8_t *images, size_t count, float *x);
/* Sample i of a batch is idx[i] (idx NULL: i) of images [][784] / labels: x [n][784] normalised, and
 * y[i] its label unless y is NULL. */
void gather_samples(const uint8_t *images, const uint8_t *labels, const uint64_t *idx, int n, float *x, uint8_t *y);
void init_uniform(float *p, size_t count, uint64_t key, float bound);

/* Output size of a stride-1 convolution. */
static inline int conv_out(int size, int k, int pad)
{
    return size + 2 * pad - k + 1;
}

/* The CPU's primitives (nn_cpu). */
void im2col_cpu(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
void col2im_cpu(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
void fill_cpu(float *y, const float *b, int rows, size_t cols, size_t ld, int by_row);
void sum_add_cpu(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride);

/* Floats of im2col scratch conv_forward/conv_backward need for chunks of `chunk` samples. */
size_t conv_scratch(int C, int H, int W, int k, int pad, int chunk, int wide);

/* The convolution and linear layers are composed of a backend's primitives (im2col, gemm, ...), so
 * both devices share this composition. */

/* Stride-1 convolution with zero padding: x [C][N][H][W], w [F][C][k][k], b [F] -> y [F][N][OH][OW].
 * `chunk` samples per im2col + GEMM (chunk >= N: one GEMM for the batch). b may be NULL: the caller
 * adds the bias later (bias_relu_forward, or after a pool, as max(x) + b = max(x + b)). wide (pad 0
 * only): y rows are W long with k-1 junk columns (op_wide_offset), so im2col and col2im move one span
 * per tap and plane instead of OH short rows, for W/OW - 1 more GEMM columns. */
void conv_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C, int H,
                  int W, int F, int k, int pad, float *col, int chunk, int wide);
/* dy [F][N][OH][OW] (wide: [OH][W] with zero junk columns): dw += dy * col^T, db += plane sums,
 * dx = col2im(w^T dy) unless dx is NULL (the first layer needs no input gradient). */
void conv_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                   float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int chunk, int wide);

/* x [N][in], w [out][in] (PyTorch layout), b [out] -> y [N][out]. */
void linear_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int in,
                    int out);
/* dw += dy^T x, db += column sums of dy, dx = dy w unless dx is NULL. */
void linear_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                     float *dx, int N, int in, int out);

void relu_forward(float *x, size_t count);                      /* in place */
/* In place on x [C][count]: x = relu(x + b[c]). */
void bias_relu_forward(float *x, const float *b, int C, size_t count);
void relu_backward(float *dy, const float *y, size_t count);    /* in place, y = the ReLU's output */

/* 2x2 max-pool, stride 2, over `planes` planes [H][ld] (W <= ld used columns) -> [H/2][W/2];
 * arg: argmax plane index. Backward writes every element of dx, 0 outside the argmaxes. */
void maxpool2_forward(const float *x, float *y, int32_t *arg, int planes, int H, int W, int ld);
void maxpool2_backward(const float *dy, const int32_t *arg, float *dx, int planes, int H, int W, int ld);

/* Dropout in place on x [N][D]; element e of sample i is kept iff the counter-based draw for
 * (key, ids[i], layer, e) is >= p; mask records the multipliers (0 or 1/(1-p)) for backward. */
void dropout_forward(float *x, float *mask, int N, int D, const uint64_t *ids, uint64_t key, int layer, float p);
void dropout_backward(float *dy, const float *mask, size_t count);

/* CNHW [C][N][HW] <-> per-sample [N][C*HW] (PyTorch's flatten order c, h, w). */
void flatten_cnhw(const float *x, float *y, int C, int N, int HW);
void unflatten_cnhw(const float *y, float *x, int C, int N, int HW);

/* BatchNorm2d on x [C][count] (count = N*H*W). Training mode: batch statistics, saves mean and
 * invstd per channel, updates running stats (unbiased variance) with momentum, and adds 1 to *tracked
 * (num_batches_tracked). */
void batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                             float *invstd, float *running_mean, float *running_var, float *tracked, int C,
                             size_t count, float momentum, float eps);
void batchnorm_forward_eval(const float *x, const float *gamma, const float *beta, const float *running_mean,
                            const float *running_var, float *y, int C, size_t count, float eps);
void batchnorm_backward(const float *x, const float *dy, const float *gamma, const float *mean, const float *invstd,
                        float *dx, float *dgamma, float *dbeta, int C, size_t count);

/* Log-softmax + NLL over z [N][K]: writes logp and the per-sample losses loss [N]. */
void log_softmax_nll_forward(const float *z, const uint8_t *labels, float *logp, float *loss, int N, int K);
/* Sum of loss [N], in double. */
double sum_losses(const float *loss, int N);
/* dz = gradient of g * (sum of losses). */
void log_softmax_nll_backward(const float *logp, const uint8_t *labels, float *dz, int N, int K, float g);
long count_correct(const float *z, const uint8_t *labels, int N, int K);

/* Optimizer updates over n parameters (op_adadelta / op_sgd of ops.h). */
void adadelta_step(float *param, const float *grad, float *square_avg, float *acc_delta, size_t n, float lr, float rho,
                   float eps, float weight_decay);
void sgd_step(float *param, const float *grad, float *buf, size_t n, float lr, float momentum, float weight_decay);
#endif
