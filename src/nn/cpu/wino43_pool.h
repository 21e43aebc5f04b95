/* net's conv2 with its pool through wino43.h, sample by sample. Each part of the batch (one per thread) keeps
 * one sample's blocked input, output and gradients in its own scratch. So the sample's convolution, pool and
 * conversions run while its blocks are in cache, and the batch's blocked tensors (9.4 MB of output for conv2)
 * are never written. Layouts, pool and ReLU as layers.h's conv_pool_forward and pool_conv_backward. */
#ifndef MNIST_WINO43_POOL_H
#define MNIST_WINO43_POOL_H
#include <stddef.h>
#include <stdint.h>

/* One batch's shape (x [C][N][H][W], the convolution's output rows ld apart in the argmaxes' planes) and its
 * buffers: parts parts of scratch, of ws (wino43_wgrad_part_size), and the transformed weights. */
typedef struct {
    int N, C, H, W, F, ld, parts;
    float *scratch, *ws, *U, *Ub;
} wino43_batch;

/* Floats of scratch per part. */
size_t wino43_pool_scratch_size(int C, int H, int W, int F);
/* py, arg = the pool (bias pb, then ReLU) of conv(x, w), U computed from w. */
void wino43_pool_forward(const wino43_batch *b, const float *x, const float *w, const float *pb, float *py,
                         int32_t *arg);
/* dw_sum, db_sum = the weight and bias gradients (overwritten), dx = the input gradient through the ReLU whose
 * output x_relu is, from the pool's output gradient dpy; Ub computed from w. */
void wino43_pool_backward(const wino43_batch *b, const float *dpy, const float *py, const int32_t *arg, const float *x,
                          const float *x_relu, const float *w, float *dw_sum, float *db_sum, float *dx);
#endif
