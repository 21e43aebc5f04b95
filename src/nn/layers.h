/* The convolution and linear layers, composed of a backend's primitives (im2col, gemm, ...), so both
 * devices share this composition; the primitives themselves are the backend's (nn_cpu.h, src/gpu/cuda/nn_cuda.cu).
 * Layouts: convolution activations are channel-major [C][N][H][W] ("CNHW"), so per-channel work
 * (bias, BatchNorm, pooling, ReLU) runs on contiguous planes and a convolution over any run of
 * samples is one GEMM; fully connected activations are [N][F]. Backward functions ADD parameter gradients
 * (dw, db, dgamma, dbeta) and SET input gradients. */
#ifndef MNIST_LAYERS_H
#define MNIST_LAYERS_H
#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"
#include "nn/ops.h"

/* Floats of im2col scratch conv_forward/conv_backward need for chunks of `chunk` samples. */
size_t conv_scratch(int C, int H, int W, int k, int pad, int chunk, int wide);

/* Stride-1 convolution with zero padding: x [C][N][H][W], w [F][C][k][k], b [F] -> y [F][N][OH][OW].
 * `chunk` samples per im2col + GEMM (chunk >= N: one GEMM for the batch). b may be NULL: the caller
 * adds the bias later (bias_relu_forward, or after a pool, as max(x) + b = max(x + b)). wide (pad 0
 * only): y rows are W long with k-1 junk columns (op_wide_offset), so im2col and col2im move one span
 * per tap and plane instead of OH short rows, for W/OW - 1 more GEMM columns. Returns 1 when what it
 * derived from x is kept for a following conv_backward of this shape (x NULL there): col holds the
 * whole batch's im2col (keep_col of backend.h and chunk >= N), or the backend's own convolution ran. */
int conv_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C, int H,
                 int W, int F, int k, int pad, float *col, int chunk, int wide);
/* dy [F][N][OH][OW] (wide: [OH][W] with zero junk columns): dw += dy * col^T, db += plane sums,
 * dx = col2im(w^T dy) unless dx is NULL (the first layer needs no input gradient). x NULL: the last
 * conv_forward, of this shape, returned 1, and its x is unchanged; what it kept is reused. col is
 * overwritten either way. */
void conv_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                   float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int chunk, int wide);

/* The loops of conv_forward (y) and conv_backward (dw, dx; not db) over samples n0 .. n1-1 only, `chunk` at a
 * time, with gemm in place of the backend's. conv_cpu.c shares a batch's samples among threads, each
 * running its own range with a one-thread GEMM and its own col (and dw). */
void conv_forward_range(const nn_backend *be, nn_gemm_fn *gemm, const float *x, const float *w, const float *b,
                        float *y, int N, int C, int H, int W, int F, int k, int pad, float *col, int n0, int n1,
                        int chunk, int wide);
void conv_backward_range(const nn_backend *be, nn_gemm_fn *gemm, const float *x, const float *w, const float *dy,
                         float *dw, float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int n0,
                         int n1, int chunk, int wide);

/* conv_forward without bias into y, then the backend's bias_relu_forward of y with b: net's conv1. A backend's
 * conv1_bias_relu_forward does both in one pass for one input channel (then nothing is kept: returns 0).
 * Returns what conv_forward returns. */
int conv_bias_relu_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C,
                           int H, int W, int F, int k, int pad, float *col, int chunk, int wide);
/* net's conv2, whose bias follows the pool (max(x) + b = max(x + b)):
 * - conv_forward without bias into y;
 * - the backend's maxpool2_relu_forward of y (rows wide ? W : OW long) with bias pb into py and arg;
 * - unless fd is NULL, flatten_dropout_forward of py into fd. The backend's pool_flatten_dropout_forward pools,
 *   flattens and drops in one pass where it has one.
 * y is scratch: a backend may pool its own layout and leave y unwritten, and y and col are NULL where the backend
 * covers the shape (conv_pool_covers). Returns what conv_forward returns; 1 where the backend's conv_pool_forward
 * did it all, fd included. */
int conv_pool_forward(const nn_backend *be, const float *x, const float *w, const float *pb, float *y, float *py,
                      int32_t *arg, const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad,
                      float *col, int chunk, int wide);
/* Its backward:
 * - unless fd is NULL, dropout_unflatten_backward of fd into dpy (then scratch);
 * - relu_maxpool2_backward of dpy (may be overwritten) into the scratch y;
 * - conv_backward with y as dy (x NULL as there);
 * - unless x_relu is NULL, dx through the ReLU whose output the input was (x_relu: its values, also when x is
 *   NULL): relu_backward(dx, x_relu).
 * Where the backend's dropout_pool_backward_sum takes fd, it does the unflatten, the pool's backward and the bias
 * gradient in one reduction, and its col2im_relu the ReLU's backward in col2im's pass. The backend's
 * pool_conv_backward, where it takes the call, does it all. */
void pool_conv_backward(const nn_backend *be, float *dpy, const nn_flat_dropout *fd, const float *py,
                        const int32_t *arg, const float *x, const float *x_relu, const float *w, float *y, float *dw,
                        float *db, float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int chunk,
                        int wide);

/* x [N][in], w [out][in] (PyTorch layout), b [out] -> y [N][out]; b NULL: no bias (the caller adds it). */
void linear_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int in,
                    int out);
/* linear_forward, then ReLU on y. */
void linear_relu_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int in,
                         int out);
/* dw += dy^T x, db += column sums of dy unless db is NULL (the caller's), dx = dy w unless dx is NULL. */
void linear_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                     float *dx, int N, int in, int out);
#endif
