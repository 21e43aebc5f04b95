// The CUDA backend (src/nn/backend.h). Elementwise kernels are grid-stride loops over the per-thread
// functions of src/gpu/kernels.h and the math of src/nn/ops.h (tested on the CPU by tests/unit/check_kernels.c);
// the GEMMs are gpu_gemm() (cuBLAS). GPU-only code here: memory and copies, launches, and the block trees
// of the reductions (block_sum: per-channel slices, the loss). Their summation order differs from the
// CPU's: results agree with the CPU path to rounding, not bit for bit, and with themselves bit for bit
// (fixed order, no atomics). Everything runs on the compute stream; only upload, download and
// count_correct wait for it, through gpu_wait_compute() (the deadline of the all-reduce); the loss stays
// on the device (add_losses).
#include "config.h"

#include <cstdint>

#include "gpu/cuda/cuda_check.h"
#include "gpu/cuda/block_sum.h"
#include "gpu/cuda/conv_pool.h"
#include "gpu/cuda/launch.h"
#include "gpu/cuda/net_head.h"
#include "gpu/cuda/pool_fused.h"
#include "gpu/cuda/step_scalars.h"
#include "gpu/gpu.h"
extern "C" {
#include "nn/backend.h"
#include "gpu/kernels.h"
}

// ---- memory -----------------------------------------------------------------------------------

static void *cu_alloc(size_t bytes)
{
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}

static void cu_free(void *p) { CUDA_CHECK(cudaFree(p)); }

static void cu_zero(void *p, size_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream())); }

// Synchronous: the host buffer may be reused as soon as this returns.
static void cu_upload(void *dst, const void *host, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream()));
    gpu_wait_compute();
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

static void cu_download(void *host, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream()));
    gpu_wait_compute();
}

// ---- elementwise kernels ----------------------------------------------------------------------

__global__ void k_gather(size_t n, const uint8_t *images, const uint8_t *labels, const uint64_t *idx, float *x,
                         uint8_t *y)
{
    GRID_STRIDE(i, n) kern_gather(i, images, labels, idx, x, y);
}

__global__ void k_im2col(size_t n, const float *x, float *col, int N, int H, int W, int k, int pad, int n0, int ns,
                         int wide)
{
    GRID_STRIDE(i, n) kern_im2col((uint32_t)i, x, col, N, H, W, k, pad, n0, ns, wide);
}

__global__ void k_conv1_bias_relu(size_t n, const float *x, const float *w, const float *b, float *y, int N, int H,
                                  int W, int k, int pad)
{
    GRID_STRIDE(i, n) y[i] = kern_conv1_bias_relu((uint32_t)i, x, w, b, N, H, W, k, pad);
}

__global__ void k_col2im(size_t n, const float *dcol, float *dx, const float *relu, int N, int H, int W, int k, int pad,
                         int n0, int ns, int wide)
{
    GRID_STRIDE(i, n) kern_col2im((uint32_t)i, dcol, dx, relu, N, H, W, k, pad, n0, ns, wide);
}

__global__ void k_fill(size_t n, float *y, const float *b, size_t cols, size_t ld, int by_row)
{
    GRID_STRIDE(i, n) kern_fill(i, y, b, cols, ld, by_row);
}

__global__ void k_relu(size_t n, float *x) { GRID_STRIDE(i, n) x[i] = op_relu(x[i]); }

__global__ void k_bias_relu(size_t n, float *x, const float *b, size_t count)
{
    GRID_STRIDE(i, n) x[i] = op_bias_relu(x[i], b[i / count]);
}

__global__ void k_relu_grad(size_t n, float *dy, const float *y)
{
    GRID_STRIDE(i, n) dy[i] = op_relu_grad(dy[i], y[i]);
}

__global__ void k_maxpool2_relu(size_t n, const float *x, const float *b, float *y, int32_t *arg, int N, int H, int W,
                                int ld)
{
    GRID_STRIDE(i, n) kern_maxpool2_relu(i, x, b, y, arg, N, H, W, ld);
}

__global__ void k_relu_maxpool2_grad(size_t n, const float *dy, const float *y, const int32_t *arg, float *dx, int H,
                                     int W, int ld)
{
    GRID_STRIDE(i, n) kern_relu_maxpool2_grad(i, dy, y, arg, dx, H, W, ld);
}

__global__ void k_dropout(size_t n, float *x, float *mask, int D, const uint64_t *ids, uint64_t key, int layer, float p,
                          const kern_scalars *s)
{
    key = kern_key(s, key);
    GRID_STRIDE(i, n) kern_dropout(i, x, mask, D, ids, key, layer, p);
}

__global__ void k_scale(size_t n, float *dy, const float *mask) { GRID_STRIDE(i, n) dy[i] *= mask[i]; }

__global__ void k_flatten_dropout(size_t n, const float *x, float *y, float *mask, int C, int N, int HW,
                                  const uint64_t *ids, uint64_t key, int layer, float p, const kern_scalars *s)
{
    key = kern_key(s, key);
    GRID_STRIDE(i, n) kern_flatten_dropout(i, x, y, mask, C, N, HW, ids, key, layer, p);
}

__global__ void k_dropout_unflatten(size_t n, const float *dy, const float *mask, float *dx, int C, int N, int HW)
{
    GRID_STRIDE(i, n) kern_dropout_unflatten(i, dy, mask, dx, C, N, HW);
}

__global__ void k_bn_eval(size_t n, const float *x, const float *gamma, const float *beta, const float *rmean,
                          const float *rvar, float *y, size_t count, float eps)
{
    GRID_STRIDE(i, n)
    {
        size_t c = i / count;
        y[i] = op_bn(x[i], rmean[c], op_bn_invstd(rvar[c], eps), gamma[c], beta[c]);
    }
}

__global__ void k_nll(size_t n, const float *z, const uint8_t *labels, float *logp, float *loss, int K)
{
    GRID_STRIDE(i, n) loss[i] = op_log_softmax_nll(z + i * K, K, labels[i], logp + i * K);
}

__global__ void k_nll_grad(size_t n, const float *logp, const uint8_t *labels, float *dz, int K, float g)
{
    GRID_STRIDE(i, n) dz[i] = op_log_softmax_nll_grad(logp + (i / K) * K, labels[i / K], (int)(i % K), g);
}

__global__ void k_adadelta(size_t n, float *param, const float *grad, float *sq, float *acc, float lr, float rho,
                           float eps, float wd, float *clear, const kern_scalars *s)
{
    lr = kern_lr(s, lr);
    GRID_STRIDE(i, n)
    {
        op_adadelta(param, grad, sq, acc, i, lr, rho, eps, wd);
        if (clear)
            clear[i] = 0.0f;
    }
}

__global__ void k_sgd(size_t n, float *param, const float *grad, float *buf, float lr, float momentum, float wd,
                      float *clear, const kern_scalars *s)
{
    lr = kern_lr(s, lr);
    GRID_STRIDE(i, n)
    {
        op_sgd(param, grad, buf, i, lr, momentum, wd);
        if (clear)
            clear[i] = 0.0f;
    }
}

// ---- per-channel reductions: a 2-D grid of slices, then a fixed-order second pass (kernels.h) -----

__global__ void k_sum_part(const float *x, size_t count, size_t cstride, size_t stride, double *part)
{
    size_t lo, hi, slot = slice_of(count, &lo, &hi);
    double s = block_sum(kern_lane_sum(x + blockIdx.x * cstride, lo, hi, stride, threadIdx.x));
    if (threadIdx.x == 0)
        part[slot] = s;
}

__global__ void k_sum_finish(size_t n, const double *part, int slices, float *out)
{
    GRID_STRIDE(c, n) kern_sum_finish(c, part, slices, out);
}

// conv1's weight and bias gradients: the slices' partials, then the second pass in the last block done.
__device__ static unsigned conv1_grad_done;

__global__ void k_conv1_grad(const float *x, const float *dy, size_t count, int N, int H, int W, int F, int k, int pad,
                             double *part, float *dw, float *db)
{
    size_t lo, hi, slot = slice_of(count, &lo, &hi);
    double s = block_sum(kern_lane_conv1_grad(blockIdx.x, x, dy, lo, hi, N, H, W, F, k, pad, threadIdx.x));
    if (threadIdx.x == 0)
        part[slot] = s;
    if (last_block_done(&conv1_grad_done))
        for (unsigned c = threadIdx.x; c < gridDim.x; c += blockDim.x)
            kern_conv1_grad_finish(c, part, (int)gridDim.y, dw, db, F * k * k);
}

// BatchNorm statistics of a slice: its sum, and its squared deviations from its own mean (two passes).
__global__ void k_bn_part(const float *x, size_t count, double *sum, double *m2)
{
    size_t lo, hi, slot = slice_of(count, &lo, &hi);
    const float *xc = x + blockIdx.x * count;
    double s = block_sum(kern_lane_sum(xc, lo, hi, 1, threadIdx.x));
    double q = block_sum(kern_lane_sqdev(xc, lo, hi, hi > lo ? s / (double)(hi - lo) : 0.0, threadIdx.x));
    if (threadIdx.x == 0) {
        sum[slot] = s;
        m2[slot] = q;
    }
}

// y over the block's slice (the reductions' grid again: no division per element), after the second pass.
__global__ void k_bn_apply(const double *sum, const double *m2, size_t count, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *invstd, float *rmean, float *rvar,
                           float *tracked, float momentum, float eps)
{
    __shared__ float st[2];
    size_t lo, hi, c = blockIdx.x, base = c * count;
    slice_of(count, &lo, &hi);
    if (threadIdx.x == 0)
        kern_bn_stats_finish(c, sum, m2, (int)gridDim.y, count, momentum, eps, st, blockIdx.y == 0, mean, invstd, rmean,
                             rvar, tracked);
    __syncthreads();
    for (size_t j = lo + threadIdx.x; j < hi; j += THREADS)
        y[base + j] = op_bn(x[base + j], st[0], st[1], gamma[c], beta[c]);
}

__global__ void k_bn_grad_part(const float *x, const float *dy, const float *mean, const float *invstd, size_t count,
                               double *pa, double *pb)
{
    size_t lo, hi, slot = slice_of(count, &lo, &hi), c = blockIdx.x;
    double a, b;
    kern_lane_bn_grad(x + c * count, dy + c * count, lo, hi, mean[c], invstd[c], threadIdx.x, &a, &b);
    a = block_sum(a);
    b = block_sum(b);
    if (threadIdx.x == 0) {
        pa[slot] = a;
        pb[slot] = b;
    }
}

// dx after the second pass; dx may alias dy: each element is read, then written, by the same thread.
__global__ void k_bn_grad_apply(const double *pa, const double *pb, size_t count, const float *x, const float *dy,
                                const float *gamma, const float *mean, const float *invstd, float *dx, float *dgamma,
                                float *dbeta)
{
    __shared__ float st[2];
    size_t lo, hi, c = blockIdx.x, base = c * count;
    slice_of(count, &lo, &hi);
    if (threadIdx.x == 0)
        kern_bn_grad_finish(c, pa, pb, (int)gridDim.y, count, st, blockIdx.y == 0, dgamma, dbeta);
    __syncthreads();
    for (size_t j = lo + threadIdx.x; j < hi; j += THREADS)
        dx[base + j] = op_bn_grad(x[base + j], dy[base + j], mean[c], invstd[c], gamma[c], st[0], st[1]);
}

// Reductions of a batch (one block): the loss sum added to *out, or the number of correct predictions.
__global__ void k_add_losses(const float *loss, int n, double *out)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += THREADS)
        s += loss[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out += s;
}

__global__ void k_count_correct(const float *z, const uint8_t *labels, int n, int K, double *out)
{
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += THREADS)
        s += op_argmax(z + (size_t)i * K, K) == labels[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = s;
}

// ---- the backend's entries --------------------------------------------------------------------

static void cu_gather(const uint8_t *images, const uint8_t *labels, const uint64_t *idx, int n, float *x, uint8_t *y)
{
    LAUNCH(k_gather, (size_t)n * MNIST_PIXELS, images, labels, idx, x, y);
}

// The kernels index in 32 bits (kernels.h): a larger convolution stops the run with the fix.
static void conv_fits32(int C, int H, int W, int k, int pad, int ns, int wide)
{
    if (!kern_conv_fits32(C, H, W, k, pad, ns, wide))
        die(EX_USAGE,
            "a convolution of %d samples (%d channels, %dx%d) exceeds the GPU kernels' 32-bit indices: "
            "lower --batch-size or --test-batch-size",
            ns, C, H, W);
}

static void cu_im2col(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide)
{
    conv_fits32(C, H, W, k, pad, ns, wide);
    LAUNCH(k_im2col, (size_t)C * k * k * ns * conv_plane(H, W, k, pad, wide), x, col, N, H, W, k, pad, n0, ns, wide);
}

static void cu_col2im_relu(const float *dcol, float *dx, const float *relu, int N, int C, int H, int W, int k, int pad,
                           int n0, int ns, int wide)
{
    conv_fits32(C, H, W, k, pad, ns, wide);
    LAUNCH(k_col2im, (size_t)C * ns * H * W, dcol, dx, relu, N, H, W, k, pad, n0, ns, wide);
}

static void cu_col2im(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns,
                      int wide)
{
    cu_col2im_relu(dcol, dx, NULL, N, C, H, W, k, pad, n0, ns, wide);
}

static void cu_fill(float *y, const float *b, int rows, size_t cols, size_t ld, int by_row)
{
    LAUNCH(k_fill, (size_t)rows * cols, y, b, cols, ld, by_row);
}

// Scratch of the per-channel reductions: two partials per slot, allocated by nn_cuda() (reduction_alloc),
// kept for the process. One launch group covers the
// KERN_RED_PARTIALS / slices channels the scratch holds (every layer of the models: one group).
static double *red_a, *red_b;

static void cu_sum_add(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride)
{
    int slices = kern_red_slices(channels, count);
    for (int c0 = 0, g; c0 < channels; c0 += g) {
        g = kern_red_group(channels - c0, slices);
        LAUNCH_GRID(k_sum_part, g, slices, x + c0 * cstride, count, cstride, stride, red_a);
        LAUNCH(k_sum_finish, (size_t)g, red_a, slices, out + c0);
    }
}

static void cu_relu_forward(float *x, size_t count) { LAUNCH(k_relu, count, x); }

static int cu_conv1_bias_relu_forward(const float *x, const float *w, const float *b, float *y, int N, int H, int W,
                                      int F, int k, int pad)
{
    size_t n = (size_t)F * N * conv_plane(H, W, k, pad, 0);
    if (n > UINT32_MAX) // the kernel indexes in 32 bits; the composition checks its own bounds
        return 0;
    LAUNCH(k_conv1_bias_relu, n, x, w, b, y, N, H, W, k, pad);
    return 1;
}

// conv_backward of backend.h for one input channel without an input gradient (net's and convnet's conv1): the
// weight and bias gradients in one reduction; 0 for every other convolution (composed by layers.c).
static int cu_conv1_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw,
                             float *db, float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    (void)be, (void)w;
    size_t count = (size_t)N * conv_plane(H, W, k, pad, 0);
    int sums = F * k * k + F, slices = kern_red_slices(sums, count);
    if (C != 1 || wide || dx || !x || count > UINT32_MAX || kern_red_group(sums, slices) < sums)
        return 0;
    LAUNCH_GRID(k_conv1_grad, sums, slices, x, dy, count, N, H, W, F, k, pad, red_a, dw, db);
    return 1;
}

static void cu_bias_relu_forward(float *x, const float *b, int C, size_t count)
{
    LAUNCH(k_bias_relu, (size_t)C * count, x, b, count);
}

static void cu_relu_backward(float *dy, const float *y, size_t count) { LAUNCH(k_relu_grad, count, dy, y); }

static void cu_maxpool2_relu_forward(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                                     int ld)
{
    LAUNCH(k_maxpool2_relu, (size_t)C * N * (H / 2) * (W / 2), x, b, y, arg, N, H, W, ld);
}

static void cu_relu_maxpool2_backward(float *dy, const float *y, const int32_t *arg, float *dx, int planes, int H,
                                      int W, int ld)
{
    LAUNCH(k_relu_maxpool2_grad, (size_t)planes * H * ld, dy, y, arg, dx, H, W, ld);
}

// MNIST_DDP_POOL=fused's backward (pool_fused.cu) in the reductions' scratch.
static int cu_dropout_pool_backward_sum(const float *dy, const float *mask, const float *y, const int32_t *arg,
                                        float *dx, float *db, int C, int N, int H, int W, int ld)
{
    return cu_dropout_pool_grad(dy, mask, y, arg, dx, db, C, N, H, W, ld, red_a);
}

static void cu_dropout_forward(float *x, float *mask, int N, int D, const uint64_t *ids, uint64_t key, int layer,
                               float p)
{
    LAUNCH(k_dropout, (size_t)N * D, x, mask, D, ids, key, layer, p, cu_scalars_key(key));
}

static void cu_dropout_backward(float *dy, const float *mask, size_t count) { LAUNCH(k_scale, count, dy, mask); }

static void cu_flatten_dropout_forward(const float *x, float *y, float *mask, int C, int N, int HW, const uint64_t *ids,
                                       uint64_t key, int layer, float p)
{
    LAUNCH(k_flatten_dropout, (size_t)C * N * HW, x, y, mask, C, N, HW, ids, key, layer, p,
           mask ? cu_scalars_key(key) : nullptr); // no mask (evaluation): no key read
}

static void cu_dropout_unflatten_backward(float *dy, const float *mask, float *dx, int C, int N, int HW)
{
    LAUNCH(k_dropout_unflatten, (size_t)C * N * HW, dy, mask, dx, C, N, HW);
}

static void cu_batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                                       float *invstd, float *running_mean, float *running_var, float *tracked, int C,
                                       size_t count, float momentum, float eps)
{
    int slices = kern_red_slices(C, count);
    for (int c0 = 0, g; c0 < C; c0 += g) {
        g = kern_red_group(C - c0, slices);
        const float *xg = x + (size_t)c0 * count;
        LAUNCH_GRID(k_bn_part, g, slices, xg, count, red_a, red_b);
        LAUNCH_GRID(k_bn_apply, g, slices, red_a, red_b, count, xg, gamma + c0, beta + c0, y + (size_t)c0 * count,
                    mean + c0, invstd + c0, running_mean + c0, running_var + c0, c0 ? nullptr : tracked, momentum, eps);
    }
}

static void cu_batchnorm_forward_eval(const float *x, const float *gamma, const float *beta, const float *running_mean,
                                      const float *running_var, float *y, int C, size_t count, float eps)
{
    LAUNCH(k_bn_eval, (size_t)C * count, x, gamma, beta, running_mean, running_var, y, count, eps);
}

static void cu_batchnorm_backward(const float *x, const float *dy, const float *gamma, const float *mean,
                                  const float *invstd, float *dx, float *dgamma, float *dbeta, int C, size_t count)
{
    int slices = kern_red_slices(C, count);
    for (int c0 = 0, g; c0 < C; c0 += g) {
        g = kern_red_group(C - c0, slices);
        size_t off = (size_t)c0 * count;
        LAUNCH_GRID(k_bn_grad_part, g, slices, x + off, dy + off, mean + c0, invstd + c0, count, red_a, red_b);
        LAUNCH_GRID(k_bn_grad_apply, g, slices, red_a, red_b, count, x + off, dy + off, gamma + c0, mean + c0,
                    invstd + c0, dx + off, dgamma + c0, dbeta + c0);
    }
}

static void cu_log_softmax_nll_forward(const float *z, const uint8_t *labels, float *logp, float *loss, int N, int K)
{
    LAUNCH(k_nll, (size_t)N, z, labels, logp, loss, K);
}

static void cu_log_softmax_nll_backward(const float *logp, const uint8_t *labels, float *dz, int N, int K, float g)
{
    LAUNCH(k_nll_grad, (size_t)N * K, logp, labels, dz, K, g);
}

// One double on the device and its pinned host copy, for count_correct, and the reductions' scratch
// (256 KiB): allocated by nn_cuda() before the first step (an allocation synchronises the device), kept
// for the process.
static double *result_dev, *result_host;

static void reduction_alloc(void)
{
    if (!result_dev) {
        CUDA_CHECK(cudaMalloc(&result_dev, sizeof *result_dev));
        CUDA_CHECK(cudaMallocHost(&result_host, sizeof *result_host));
        red_a = (double *)cu_alloc(KERN_RED_PARTIALS * sizeof *red_a);
        red_b = (double *)cu_alloc(KERN_RED_PARTIALS * sizeof *red_b);
    }
}

static double fetch(double *dev, double *host)
{
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(host, dev, sizeof *host, cudaMemcpyDeviceToHost, stream()));
    gpu_wait_compute();
    return *host;
}

static void cu_add_losses(const float *loss, int N, double *sum) { LAUNCH_BLOCKS(k_add_losses, 1, loss, N, sum); }

static long cu_count_correct(const float *z, const uint8_t *labels, int N, int K)
{
    LAUNCH_BLOCKS(k_count_correct, 1, z, labels, N, K, result_dev);
    return (long)fetch(result_dev, result_host);
}

static void cu_adadelta_step(float *param, const float *grad, float *square_avg, float *acc_delta, size_t n, float lr,
                             float rho, float eps, float weight_decay, float *clear)
{
    LAUNCH(k_adadelta, n, param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, clear, cu_scalars_lr(lr));
}

static void cu_sgd_step(float *param, const float *grad, float *buf, size_t n, float lr, float momentum,
                        float weight_decay, float *clear)
{
    LAUNCH(k_sgd, n, param, grad, buf, lr, momentum, weight_decay, clear, cu_scalars_lr(lr));
}

static nn_counts cu_counts(void)
{
    nn_counts c;
    gpu_counted(&c.kernels, &c.gemms, &c.waits);
    return c;
}

static void *cu_graph_end(char *why, size_t len) { return gpu_graph_end(why, len); }
static void cu_graph_launch(void *g) { gpu_graph_launch((gpu_graph *)g); }
static void cu_graph_free(void *g) { gpu_graph_free((gpu_graph *)g); }

// A whole batch per im2col + GEMM: the GPU has the memory, and one large GEMM keeps it busy.
// Designated initialisers (C++20, in declaration order): entries of the same type (relu_backward and
// dropout_backward) cannot be swapped silently by a reordering of backend.h.
static const nn_backend cuda_backend = {
    .name = "cuda",
    .chunk = 1 << 30,
    .keep_col = 1,
    .alloc = cu_alloc,
    .free = cu_free,
    .zero = cu_zero,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .gather = cu_gather,
    .gemm = gpu_gemm,
    .im2col = cu_im2col,
    .col2im = cu_col2im,
    .fill = cu_fill,
    .sum_add = cu_sum_add,
    .relu_forward = cu_relu_forward,
    .bias_relu_forward = cu_bias_relu_forward,
    .relu_backward = cu_relu_backward,
    .maxpool2_relu_forward = cu_maxpool2_relu_forward,
    .relu_maxpool2_backward = cu_relu_maxpool2_backward,
    .dropout_forward = cu_dropout_forward,
    .dropout_backward = cu_dropout_backward,
    .flatten_dropout_forward = cu_flatten_dropout_forward,
    .dropout_unflatten_backward = cu_dropout_unflatten_backward,
    .batchnorm_forward_train = cu_batchnorm_forward_train,
    .batchnorm_forward_eval = cu_batchnorm_forward_eval,
    .batchnorm_backward = cu_batchnorm_backward,
    .log_softmax_nll_forward = cu_log_softmax_nll_forward,
    .log_softmax_nll_backward = cu_log_softmax_nll_backward,
    .add_losses = cu_add_losses,
    .count_correct = cu_count_correct,
    .counts = cu_counts,
    .adadelta_step = cu_adadelta_step,
    .sgd_step = cu_sgd_step,
    .step_scalars = cu_step_scalars,
    .graph_begin = gpu_graph_begin,
    .graph_end = cu_graph_end,
    .graph_launch = cu_graph_launch,
    .graph_free = cu_graph_free,
};

extern "C" const nn_backend *nn_cuda(unsigned switches)
{
    static nn_backend with[NN_CUDA_SWITCHES]; // the same with the paths behind switches (backend.h), by their bits
    if (!gpu_compute_stream())
        die(EX_SOFTWARE, "nn_cuda: no device bound (gpu_select() comes first)");
    reduction_alloc();
    cu_scalars_alloc();
    if (!switches)
        return &cuda_backend;
    nn_backend *b = &with[switches % NN_CUDA_SWITCHES];
    *b = cuda_backend;
    if (switches & NN_CUDA_CONV1_DIRECT) {
        b->conv1_bias_relu_forward = cu_conv1_bias_relu_forward;
        b->conv_backward = cu_conv1_backward;
    }
    if (switches & NN_CUDA_HEAD_FUSED)
        b->head_train = cu_net_head;
    if (switches & NN_CUDA_POOL_FUSED) {
        b->pool_flatten_dropout_forward = cu_pool_flatten_dropout_forward;
        b->dropout_pool_backward_sum = cu_dropout_pool_backward_sum;
        b->col2im_relu = cu_col2im_relu;
    }
    if (switches & NN_CUDA_CONV2_DIRECT) {
        cu_conv_pool_alloc();
        int tf32 = switches & NN_CUDA_TF32, three = switches & NN_CUDA_3XTF32;
        b->conv_pool_forward = tf32    ? cu_conv_pool_forward<CP_TF32>
                               : three ? cu_conv_pool_forward<CP_3XTF32>
                                       : cu_conv_pool_forward<CP_FP32>;
        b->pool_conv_backward = tf32    ? cu_pool_conv_backward<CP_TF32>
                                : three ? cu_pool_conv_backward<CP_3XTF32>
                                        : cu_pool_conv_backward<CP_FP32>;
        b->conv_pool_covers = cu_conv_pool_covers;
    }
    if (switches & NN_CUDA_FORKED) {
        gpu_blas_side_init(); // creates the side stream and its handle before any step
        b->side_fork = gpu_side_fork;
        b->gemm_side = gpu_gemm_side;
        b->side_join = gpu_side_join;
    }
    if (switches & NN_CUDA_FC_EPILOGUE) {
        gpu_blas_lt_init(); // the handle and workspace before any step: a capture allocates nothing
        b->linear_forward = gpu_linear_lt;
    }
    return b;
}
