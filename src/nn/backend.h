/* Where the model computes: a table of the layer kernels of nn_cpu.h plus memory functions. The model,
 * optimizer, trainer and evaluation call only through it, so one model.c drives both devices:
 * nn_cpu (src/nn/cpu/nn_cpu.c: CBLAS and loops over ops.h) and the GPU layer's nn_cuda() (src/gpu/gpu.h:
 * cuBLAS and grid-stride kernels over the same ops.h functions). Pointers handed to a backend's functions are
 * its own memory (alloc); host data crosses only through upload/download. Semantics of every entry are those of the
 * nn_cpu.h function cpu_<entry>. The CUDA backend queues work on gpu_compute_stream(); only
 * download and the functions returning a host value wait for it. */
#ifndef MNIST_BACKEND_H
#define MNIST_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "nn/conv_stack.h"
#include "nn/head.h"

/* Work a backend queued and waited for since the process started: kernel launches, GEMM calls, and host
 * waits for the device, as counted by its own launch wrappers and wait function. */
typedef struct {
    long kernels, gemms, waits;
} nn_counts;

/* The GEMM of gemm.h, row-major semantics. */
typedef void nn_gemm_fn(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc);

/* The flatten and dropout after a pool (net's dropout1; flatten_dropout_forward below, of the pooled output): f
 * [N][C*OP] and mask (NULL: no dropout, as in evaluation) drawn for ids, key, layer and p. In a backward, f is the
 * gradient of the flattened output and mask the forward's. */
typedef struct {
    float *f, *mask;
    const uint64_t *ids;
    uint64_t key;
    int layer;
    float p;
} nn_flat_dropout;

typedef struct nn_backend {
    const char *name; /* "cpu" or "cuda" */
    int chunk;        /* samples per im2col + GEMM in a convolution */
    int keep_col;     /* 1: when one chunk holds the batch, a convolution's backward reuses the column
                       * buffer its forward left (conv_backward with x NULL) instead of redoing im2col */
    int host_memory;  /* 1: alloc gives host memory, which the host may fill directly (no upload needed) */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*upload)(void *dst, const void *host, size_t bytes);
    void (*download)(void *host, const void *src, size_t bytes);
    /* bytes from src to dst, both backend memory, queued (no wait) */
    void (*copy)(void *dst, const void *src, size_t bytes);

    void (*gather)(const uint8_t *images, const uint8_t *labels, const uint64_t *idx, int n, float *x, uint8_t *y);
    /* Primitives of the convolution and linear layers (conv_forward etc. of layers.h compose them):
     * - gemm: that of gemm.h;
     * - im2col / col2im: of samples n0 .. n0+ns-1 (wide: the wide layout of ops.h);
     * - fill: y[r][j] = b[r] (by_row) or b[j], r < rows, j < cols, rows ld apart;
     * - sum_add: out[c] += sum of count values stride apart from x + c * cstride (bias gradients). */
    nn_gemm_fn *gemm;
    void (*im2col)(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
    void (*col2im)(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide);
    void (*fill)(float *y, const float *b, int rows, size_t cols, size_t ld, int by_row);
    void (*sum_add)(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride);
    void (*relu_forward)(float *x, size_t count);
    void (*bias_relu_forward)(float *x, const float *b, int C, size_t count);
    void (*relu_backward)(float *dy, const float *y, size_t count);
    /* Fused pairs: one pass over the larger buffer on the GPU; the CPU runs the pair of nn_cpu.h functions.
     * - forward: y = relu(maxpool2(x) + b[c]) over planes [C][N] (b NULL: relu(maxpool2(x)));
     * - backward: dx = maxpool2_backward of relu_backward(dy, y), y being the pooled ReLU output. dy may be
     *   overwritten (the CPU applies the ReLU's gradient in place). */
    void (*maxpool2_relu_forward)(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                                  int ld);
    void (*relu_maxpool2_backward)(float *dy, const float *y, const int32_t *arg, float *dx, int planes, int H, int W,
                                   int ld);
    /* Pool, flatten and dropout fused both ways; NULL: never. The CUDA backend has them with the fused pool
     * (docs/gpu.md#variants-for-measurement), where layers.c's conv_pool_forward and pool_conv_backward call them.
     * - Forward, in one pass: maxpool2_relu_forward of x into y and arg, then flatten_dropout_forward of y into f
     *   and mask (mask NULL: no dropout).
     * - Backward, in one pass: relu_maxpool2_backward of dropout_unflatten_backward(dy, mask) into dx (dy
     *   [N][C*(H/2)*(W/2)]; y the pooled ReLU output), and db[c] += the sum of channel c's dx (planes c*N ..
     *   c*N+N-1), the bias gradient of the convolution the pool follows.
     * - The backward returns 0 having done nothing (pool_conv_backward composes it), or 1 having done it. Then
     *   pool_conv_backward composes the convolution's backward from im2col and gemm (conv_backward_range; the
     *   backend's conv_backward is not asked), with col2im_relu where the backend has it.
     * - col2im_relu: col2im, then dx through the ReLU whose output is relu (relu_backward of the samples
     *   written), in the same pass. */
    void (*pool_flatten_dropout_forward)(const float *x, const float *b, float *y, int32_t *arg, float *f, float *mask,
                                         int C, int N, int H, int W, int ld, const uint64_t *ids, uint64_t key,
                                         int layer, float p);
    int (*dropout_pool_backward_sum)(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx,
                                     float *db, int C, int N, int H, int W, int ld);
    void (*col2im_relu)(const float *dcol, float *dx, const float *relu, int N, int C, int H, int W, int k, int pad,
                        int n0, int ns, int wide);
    void (*dropout_forward)(float *x, float *mask, int N, int D, const uint64_t *ids, uint64_t key, int layer, float p);
    void (*dropout_backward)(float *dy, const float *mask, size_t count);
    /* y = flatten_cnhw(x), then dropout_forward on y [N][C*HW] unless mask is NULL; backward: dx =
     * unflatten_cnhw of dropout_backward(dy, mask) (mask NULL: of dy; dy may be overwritten). */
    void (*flatten_dropout_forward)(const float *x, float *y, float *mask, int C, int N, int HW, const uint64_t *ids,
                                    uint64_t key, int layer, float p);
    void (*dropout_unflatten_backward)(float *dy, const float *mask, float *dx, int C, int N, int HW);
    void (*batchnorm_forward_train)(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                                    float *invstd, float *running_mean, float *running_var, float *tracked, int C,
                                    size_t count, float momentum, float eps);
    void (*batchnorm_forward_eval)(const float *x, const float *gamma, const float *beta, const float *running_mean,
                                   const float *running_var, float *y, int C, size_t count, float eps);
    void (*batchnorm_backward)(const float *x, const float *dy, const float *gamma, const float *mean,
                               const float *invstd, float *dx, float *dgamma, float *dbeta, int C, size_t count);
    void (*log_softmax_nll_forward)(const float *z, const uint8_t *labels, float *logp, float *loss, int N, int K);
    void (*log_softmax_nll_backward)(const float *logp, const uint8_t *labels, float *dz, int N, int K, float g);
    /* *sum (one double of backend memory) += the sum of loss[0..N): the loss stays on the device until
     * someone downloads it, so a training step need not wait for the GPU. */
    void (*add_losses)(const float *loss, int N, double *sum);
    long (*count_correct)(const float *z, const uint8_t *labels, int N, int K);
    /* The counts so far (the metrics summary's per-step figures); NULL: not counted (the CPU backend). */
    nn_counts (*counts)(void);
    /* The optimizers' updates; unless clear is NULL (it is grad then), each gradient is zeroed once read: the
     * next step's gradients start from zero without a pass of their own. */
    void (*adadelta_step)(float *param, const float *grad, float *square_avg, float *acc_delta, size_t n, float lr,
                          float rho, float eps, float weight_decay, float *clear);
    void (*sgd_step)(float *param, const float *grad, float *buf, size_t n, float lr, float momentum,
                     float weight_decay, float *clear);
    /* Whole convolutions with the semantics of layers.h's conv_forward / conv_backward (no scratch). They return
     * 1, or 0 having done nothing for a shape they leave to im2col and gemm (the backward leaves the shapes the
     * forward leaves). be is the backend they were called through, whose primitives they may use. NULL: layers.c
     * composes every convolution from im2col and gemm.
     * - the CPU's (conv_cpu.h) share small layers' samples among threads;
     * - oneDNN's run its primitives;
     * - the CUDA backend's, with the direct conv1 (docs/gpu.md#variants-for-measurement), reduces conv1's weight
     *   and bias gradients (one input channel, no input gradient) in one pass. */
    int (*conv_forward)(const struct nn_backend *be, const float *x, const float *w, const float *b, float *y, int N,
                        int C, int H, int W, int F, int k, int pad, int wide);
    int (*conv_backward)(const struct nn_backend *be, const float *x, const float *w, const float *dy, float *dw,
                         float *db, float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide);
    /* layers.h's conv_pool_forward / pool_conv_backward, where the backend pools its own layout of the
     * convolution's output:
     * - it never writes the caller's scratch y, and takes dx through x's ReLU in its own layout of dx;
     * - fd included: the forward's flatten and dropout go into fd; in the backward dpy is scratch and the pooled
     *   gradient is fd's;
     * - 0: it did nothing, leaving the call to layers.c's composition (the backward declines what the forward
     *   declined); NULL leaves every call there.
     * The CPU's with oneDNN (declining fd); the CUDA backend's with the direct conv2, net's conv2 without a column
     * buffer (docs/gpu.md#variants-for-measurement). */
    int (*conv_pool_forward)(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                             const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad, int wide);
    int (*pool_conv_backward)(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg,
                              const float *x, const float *x_relu, const float *w, float *dw, float *db, float *dx,
                              int N, int C, int H, int W, int F, int k, int pad, int wide);
    /* 1 when those two take every call of this shape with 1..N samples, fd or not: the model then allocates
     * neither the convolution's output nor its column buffer (layers.c's composition has none to run on).
     * NULL: never promised. */
    int (*conv_pool_covers)(int N, int C, int H, int W, int F, int k, int pad, int wide);
    /* layers.h's conv_bias_relu_forward of one input channel, not wide, in one pass; 0 having done nothing
     * (layers.c composes it). NULL: always composed. The CUDA backend's with the direct conv1
     * (docs/gpu.md#variants-for-measurement). */
    int (*conv1_bias_relu_forward)(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F,
                                   int k, int pad);
    /* net's two convolutions (conv_stack.h) in one pass each way; 0 having done nothing for a shape it leaves
     * to the layers above (networks.c composes them; the backward leaves the shapes the forward leaves). NULL:
     * always composed. The CPU's with wino43 (wino43_stack.h). */
    int (*conv_stack_forward)(const nn_conv_stack *s);
    int (*conv_stack_backward)(const nn_conv_stack *s);
    /* net's training head (head.h) in one pass; NULL: networks.c composes it from the entries above. The CUDA
     * backend's with the fused head (docs/gpu.md#variants-for-measurement): one block. */
    void (*head_train)(const nn_head *h);
    /* layers.h's linear_forward with a bias (and its ReLU where relu: linear_relu_forward) in one call; 0
     * having done nothing (layers.c composes it). NULL: always composed. The CUDA backend's with
     * MNIST_DDP_FC=epilogue (docs/gpu.md#variants-for-measurement): one cuBLASLt matmul. */
    int (*linear_forward)(const float *x, const float *w, const float *b, float *y, int N, int in, int out, int relu);
    /* The step's learning rate and dropout key, written to the backend's memory in order with the work queued
     * around it: from then on the entries above read them there (the CUDA backend's optimizer and dropout
     * kernels), so a graph captured once replays with each step's values. Every lr and key passed to them
     * while training must be the pair last written (the backend dies otherwise). NULL: they are taken by value
     * only (CPU). */
    void (*step_scalars)(float lr, uint64_t key);
    /* A graph of the work queued between graph_begin and graph_end, replayed by graph_launch (CUDA graphs:
     * gpu.h's gpu_graph_*, whose failures they report the same way); NULL: the backend has none (CPU). */
    int (*graph_begin)(char *why, size_t len);
    void *(*graph_end)(char *why, size_t len);
    void (*graph_launch)(void *graph);
    void (*graph_free)(void *graph);
    /* A second queue beside the backend's one (the CUDA backend's MNIST_DDP_BACKWARD=forked: a second stream):
     * work queued by gemm_side between side_fork and side_join may run beside what the backend queues
     * meanwhile; side_join orders it before everything queued after. NULL: one queue (CPU). */
    void (*side_fork)(void);
    nn_gemm_fn *gemm_side;
    void (*side_join)(void);
} nn_backend;

extern const nn_backend nn_cpu;

#endif
