/* What one GPU thread computes for flat index i: the index decomposition of each elementwise layer
 * kernel, calling the math of ops.h. gpu/cuda/nn_cuda.cu runs these in grid-stride loops; tests/unit/check_kernels.c
 * runs them in plain loops on the CPU and compares with the CPU layers (src/nn/cpu/nn_cpu.c), so the GPU's
 * index math is tested on machines without a GPU. Sizes and layouts as in nn_cpu.h. */
#ifndef MNIST_KERNELS_H
#define MNIST_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "base/host_device.h"
#include "data/mnist.h"
#include "nn/head.h"
#include "nn/ops.h"

/* The step's learning rate and dropout key in device memory (backend.h's step_scalars): the optimizer and
 * dropout kernels read them there, so one graph replays with the values the host wrote before each step. A kernel
 * given NULL uses its by-value argument (nothing bound: unit tests, evaluation). */
typedef struct {
    uint64_t key;
    float lr;
} kern_scalars;

static inline HD float kern_lr(const kern_scalars *s, float lr) { return s ? s->lr : lr; }
static inline HD uint64_t kern_key(const kern_scalars *s, uint64_t key) { return s ? s->key : key; }

/* i < n * MNIST_PIXELS: pixel p of batch sample i / MNIST_PIXELS, which is sample idx[that] (idx NULL: itself). */
static inline HD void kern_gather(size_t i, const uint8_t *images, const uint8_t *labels, const uint64_t *idx, float *x,
                                  uint8_t *y)
{
    size_t n = i / MNIST_PIXELS, p = i % MNIST_PIXELS;
    uint64_t s = idx ? idx[n] : (uint64_t)n;
    x[i] = op_normalize(images[s * MNIST_PIXELS + p]);
    if (y && p == 0)
        y[n] = labels[s];
}

/* im2col and col2im index in 32 bits: a GPU divides 32-bit integers in a few instructions, 64-bit ones in a long
 * emulated sequence. So the column buffer of ns samples and their input gradient must have at most 2^32 - 1
 * elements (net's conv2 at 4096 samples: 7.4e8). The CUDA backend checks it before a launch. */
static inline HD int kern_conv_fits32(int C, int H, int W, int k, int pad, int ns, int wide)
{
    return (size_t)C * (size_t)(k * k) * (size_t)ns * conv_plane(H, W, k, pad, wide) <= UINT32_MAX &&
           (size_t)C * (size_t)ns * H * W <= UINT32_MAX;
}

/* i < C*k*k * ns*P: one entry of col [C*k*k][ns*P] (P = OH*OW, or OH*W when wide); the channel comes
 * from i, so C is only the caller's bound. */
static inline HD void kern_im2col(uint32_t i, const float *x, float *col, int N, int H, int W, int k, int pad, int n0,
                                  int ns, int wide)
{
    uint32_t OH = (uint32_t)conv_out(H, k, pad), OW = (uint32_t)conv_ld(W, k, pad, wide), uk = (uint32_t)k;
    uint32_t P = OH * OW, ld = (uint32_t)ns * P, r = i / ld, q = i - r * ld;
    uint32_t c = r / (uk * uk), t = r - c * uk * uk, kh = t / uk, kw = t - kh * uk;
    uint32_t n = q / P, j = q - n * P;
    const float *plane = x + ((size_t)c * (size_t)N + (size_t)n0 + n) * (size_t)H * (size_t)W;
    if (wide) {
        col[i] = (int)j < op_wide_span((int)OH, W, k) ? plane[j + (uint32_t)op_wide_offset((int)kh, (int)kw, W)] : 0.0f;
    } else {
        uint32_t oh = j / OW;
        col[i] = op_im2col(plane, H, W, pad, (int)kh, (int)kw, (int)oh, (int)(j - oh * OW));
    }
}

/* i < F * N*OH*OW: one output of a convolution of one input channel (not wide) with its bias and ReLU, the taps
 * in im2col's (kh, kw) order. It writes y [F][N][OH*OW] as conv_forward then bias_relu_forward would, in one pass
 * instead of im2col, a K = k*k GEMM and a bias pass (net's conv1 on the GPU). */
static inline HD float kern_conv1_bias_relu(uint32_t i, const float *x, const float *w, const float *b, int N, int H,
                                            int W, int k, int pad)
{
    uint32_t OH = (uint32_t)conv_out(H, k, pad), OW = (uint32_t)conv_out(W, k, pad), P = OH * OW;
    uint32_t NP = (uint32_t)N * P, f = i / NP, q = i - f * NP, n = q / P, j = q - n * P, oh = j / OW;
    const float *plane = x + (size_t)n * (size_t)H * (size_t)W, *wf = w + (size_t)f * (size_t)(k * k);
    float s = 0.0f;
    for (int kh = 0; kh < k; kh++)
        for (int kw = 0; kw < k; kw++)
            s += wf[kh * k + kw] * op_im2col(plane, H, W, pad, kh, kw, (int)oh, (int)(j - oh * OW));
    return op_bias_relu(s, b[f]);
}

/* i < C * ns*H*W: input gradient (c, n0 + n, ih, iw) gathered from dcol, taps in op_col2im's order; unless relu
 * is NULL, then through the ReLU whose output relu is (relu_backward's op on the sum: the same bits). */
static inline HD void kern_col2im(uint32_t i, const float *dcol, float *dx, const float *relu, int N, int H, int W,
                                  int k, int pad, int n0, int ns, int wide)
{
    uint32_t OH = (uint32_t)conv_out(H, k, pad), OW = (uint32_t)conv_ld(W, k, pad, wide);
    uint32_t P = OH * OW, ld = (uint32_t)ns * P, HW = (uint32_t)H * (uint32_t)W, nHW = (uint32_t)ns * HW;
    uint32_t c = i / nHW, q = i - c * nHW, n = q / HW, j = q - n * HW;
    const float *src = dcol + (size_t)c * (size_t)(k * k) * ld + (size_t)n * P;
    float s = 0.0f;
    if (wide) {
        int span = op_wide_span((int)OH, W, k);
        for (int kh = 0; kh < k; kh++)
            for (int kw = 0; kw < k; kw++) {
                int o = (int)j - op_wide_offset(kh, kw, W);
                if (o >= 0 && o < span)
                    s += src[(size_t)(kh * k + kw) * ld + (size_t)o];
            }
    } else {
        uint32_t ih = j / (uint32_t)W;
        s = op_col2im(src, ld, k, pad, (int)OH, (int)OW, (int)ih, (int)(j - ih * (uint32_t)W));
    }
    size_t at = ((size_t)c * (size_t)N + (size_t)n0 + n) * HW + j;
    dx[at] = relu ? op_relu_grad(s, relu[at]) : s;
}

/* i < rows * cols: y[r][j] = b[r] (by_row) or b[j]. */
static inline HD void kern_fill(size_t i, float *y, const float *b, size_t cols, size_t ld, int by_row)
{
    size_t r = i / cols, j = i % cols;
    y[r * ld + j] = by_row ? b[r] : b[j];
}

/* i < planes * (H/2) * (W/2): pooled output i, its argmax into arg[i]. */
static inline HD float kern_maxpool2_at(size_t i, const float *x, int32_t *arg, int H, int W, int ld)
{
    size_t OP = (size_t)(H / 2) * (W / 2), p = i / OP, o = i % OP;
    return op_maxpool2(x + p * H * ld, ld, (int)(o / (size_t)(W / 2)), (int)(o % (size_t)(W / 2)), &arg[i]);
}

/* i < C*N * (H/2) * (W/2): the pool of planes [C][N][H][ld], then the ReLU of it plus its channel's bias (b
 * NULL: none), as the models' pool + (bias) ReLU do. One pass: the convolution's output read once, the pooled
 * one written once (pool, then ReLU, wrote it, read it back and wrote it again). */
static inline HD void kern_maxpool2_relu(size_t i, const float *x, const float *b, float *y, int32_t *arg, int N, int H,
                                         int W, int ld)
{
    float m = kern_maxpool2_at(i, x, arg, H, W, ld);
    y[i] = b ? op_bias_relu(m, b[i / ((size_t)N * (size_t)(H / 2) * (size_t)(W / 2))]) : op_relu(m);
}

/* i < planes * H * ld: whether input i is the argmax of its window (0 outside every window), and *o that
 * window's pooled output (the max-pool's backward gathers its gradient from there). */
static inline HD int kern_maxpool2_src(size_t i, const int32_t *arg, int H, int W, int ld, size_t *o)
{
    int OH = H / 2, OW = W / 2;
    size_t p = i / ((size_t)H * ld), q = i % ((size_t)H * ld);
    int ih = (int)(q / (size_t)ld), iw = (int)(q % (size_t)ld);
    if (ih >= 2 * OH || iw >= 2 * OW)
        return 0;
    *o = p * OH * OW + (size_t)(ih / 2) * OW + (size_t)(iw / 2);
    return arg[*o] == (int32_t)q;
}

/* i < planes * H * ld: input gradient i of the max-pool whose pooled output y went through a ReLU with output
 * gradient dy: the ReLU's backward and the pool's in one pass (dy is read, not rewritten first). */
static inline HD void kern_relu_maxpool2_grad(size_t i, const float *dy, const float *y, const int32_t *arg, float *dx,
                                              int H, int W, int ld)
{
    size_t o;
    dx[i] = kern_maxpool2_src(i, arg, H, W, ld, &o) ? op_relu_grad(dy[o], y[o]) : 0.0f;
}

/* i < N * D: the dropout multiplier of element i % D of sample i / D. */
static inline HD float kern_dropout_mask(size_t i, int D, const uint64_t *ids, uint64_t key, int layer, float p)
{
    return op_dropout_mask(op_dropout_key(key, ids[i / (size_t)D], layer), i % (size_t)D, op_dropout_threshold(p),
                           op_dropout_scale(p));
}

/* i < N * D: element i % D of sample i / D. */
static inline HD void kern_dropout(size_t i, float *x, float *mask, int D, const uint64_t *ids, uint64_t key, int layer,
                                   float p)
{
    mask[i] = kern_dropout_mask(i, D, ids, key, layer, p);
    x[i] *= mask[i];
}

/* For i < C*N*HW, an index of the per-sample layout [N][C][HW]: the same element's CNHW index (flatten:
 * y[i] = x[kern_cnhw_index(i)], unflatten the reverse). */
static inline HD size_t kern_cnhw_index(size_t i, int C, int N, int HW)
{
    size_t per = (size_t)C * HW, n = i / per, c = (i % per) / (size_t)HW;
    return (c * (size_t)N + n) * HW + i % (size_t)HW;
}

/* i < C*N*HW: flattened element i, then (mask not NULL) its dropout (kern_dropout, D = C*HW): one pass where
 * flatten wrote y and dropout read it back and wrote it again. */
static inline HD void kern_flatten_dropout(size_t i, const float *x, float *y, float *mask, int C, int N, int HW,
                                           const uint64_t *ids, uint64_t key, int layer, float p)
{
    float v = x[kern_cnhw_index(i, C, N, HW)];
    if (mask) {
        mask[i] = kern_dropout_mask(i, C * HW, ids, key, layer, p);
        v *= mask[i];
    }
    y[i] = v;
}

/* j < C*N * (H/2) * (W/2), an index of the per-sample layout [N][C][OP] (OP = (H/2) * (W/2)). First the pooled
 * output, at its CNHW place in y (and arg) as kern_maxpool2_relu writes it; then element j of its flattened
 * dropout (kern_flatten_dropout, HW = OP), which reads it back from there. So the models' pool, ReLU, flatten
 * and dropout run in one pass with the same float operations (the fused pool:
 * docs/gpu.md#variants-for-measurement). */
static inline HD void kern_pool_flatten_dropout(size_t j, const float *x, const float *b, float *y, int32_t *arg,
                                                float *f, float *mask, int C, int N, int H, int W, int ld,
                                                const uint64_t *ids, uint64_t key, int layer, float p)
{
    int OP = (H / 2) * (W / 2);
    kern_maxpool2_relu(kern_cnhw_index(j, C, N, OP), x, b, y, arg, N, H, W, ld);
    kern_flatten_dropout(j, y, f, mask, C, N, OP, ids, key, layer, p);
}

/* The backward of that: dy[i] (times mask[i] unless mask is NULL) to its CNHW place in dx. */
static inline HD void kern_dropout_unflatten(size_t i, const float *dy, const float *mask, float *dx, int C, int N,
                                             int HW)
{
    dx[kern_cnhw_index(i, C, N, HW)] = mask ? dy[i] * mask[i] : dy[i];
}

/* ---- Per-channel reductions (bias gradients, BatchNorm statistics and gradients) ----------------
 * A 2-D grid: block (c, s) reduces slice s (op_slice) of channel c's count values with KERN_LANES threads,
 * thread `lane` taking every KERN_LANES-th value (kern_lane_*). The block adds its lanes in a fixed tree
 * (block_sum in src/gpu/cuda/nn_cuda.cu) and writes one partial to scratch[c * slices + s]. A second pass
 * (kern_*_finish) adds each channel's partials in slice order. No atomics: the same inputs give the same bits
 * on every run. The slicing depends on (channels, count) only. BatchNorm's second pass runs in every block of
 * its elementwise pass (the same sums in the same order in each), which saves a launch. */
enum {
    KERN_LANES = 256,                    /* threads of a reduction block (a power of two: the tree halves it) */
    KERN_RED_BLOCKS = 1024,              /* blocks wanted per reduction: ~8 per SM of a 132-SM H100 */
    KERN_RED_SLICE_MIN = 4 * KERN_LANES, /* values per slice at least: 4 loads per thread */
    KERN_RED_SLICES_MAX = 64,            /* slices per channel at most (the second pass is serial) */
    KERN_RED_PARTIALS = 1 << 14          /* scratch slots per launch; more channels: launched in groups */
};

static inline HD int kern_red_slices(int channels, size_t count)
{
    size_t c = channels > 0 ? (size_t)channels : 1;
    size_t want = (KERN_RED_BLOCKS + c - 1) / c, most = count / KERN_RED_SLICE_MIN;
    size_t s = want < most ? want : most;
    s = s < KERN_RED_SLICES_MAX ? s : KERN_RED_SLICES_MAX;
    return s ? (int)s : 1;
}

/* Channels per launch: as many as the scratch holds partials for. */
static inline HD int kern_red_group(int channels, int slices)
{
    int g = KERN_RED_PARTIALS / slices;
    return g < channels ? g : channels;
}

/* Lane `lane`'s share of slice [lo, hi) of a channel: values x[j * stride]. */
static inline HD double kern_lane_sum(const float *x, size_t lo, size_t hi, size_t stride, unsigned lane)
{
    double s = 0.0;
    for (size_t j = lo + lane; j < hi; j += KERN_LANES)
        s += x[j * stride];
    return s;
}

/* Its share of the squared deviations from the slice's mean (the second of BatchNorm's two passes over a
 * slice). */
static inline HD double kern_lane_sqdev(const float *x, size_t lo, size_t hi, double mean, unsigned lane)
{
    double q = 0.0;
    for (size_t j = lo + lane; j < hi; j += KERN_LANES) {
        double d = x[j] - mean;
        q += d * d;
    }
    return q;
}

/* Its share of op_bn_grad_sums: sum(dy) into *a, sum(dy * xhat) into *b. */
static inline HD void kern_lane_bn_grad(const float *x, const float *dy, size_t lo, size_t hi, float mean, float invstd,
                                        unsigned lane, double *a, double *b)
{
    *a = *b = 0.0;
    for (size_t j = lo + lane; j < hi; j += KERN_LANES) {
        *a += dy[j];
        *b += (double)dy[j] * (double)((x[j] - mean) * invstd);
    }
}

/* Lane `lane`'s share of slice [lo, hi) of conv1's gradient sum c over the N*OH*OW outputs of a convolution of
 * one input channel (not wide):
 * - c < F*k*k: dw[f][kh][kw], the output gradient dy times the input under that tap (products in double);
 * - otherwise db[c - F*k*k], the sum of dy.
 * So the weight and bias gradients take one reduction instead of im2col, a GEMM and sum_add (the direct conv1:
 * docs/gpu.md#variants-for-measurement). */
static inline HD double kern_lane_conv1_grad(uint32_t c, const float *x, const float *dy, size_t lo, size_t hi, int N,
                                             int H, int W, int F, int k, int pad, unsigned lane)
{
    uint32_t OW = (uint32_t)conv_out(W, k, pad), P = (uint32_t)conv_out(H, k, pad) * OW, K = (uint32_t)(k * k);
    uint32_t FK = (uint32_t)F * K, f = c < FK ? c / K : c - FK, t = c < FK ? c - f * K : 0, kh = t / (uint32_t)k;
    const float *dyf = dy + (size_t)f * (size_t)N * P;
    double s = 0.0;
    for (size_t e = lo + lane; e < hi; e += KERN_LANES) {
        uint32_t n = (uint32_t)e / P, j = (uint32_t)e - n * P, oh = j / OW;
        s += c < FK ? (double)dyf[e] * op_im2col(x + (size_t)n * (size_t)(H * W), H, W, pad, (int)kh,
                                                 (int)(t - kh * (uint32_t)k), (int)oh, (int)(j - oh * OW))
                    : (double)dyf[e];
    }
    return s;
}

/* Lane `lane`'s share of slice [lo, hi) of channel c's pooled outputs in the backward of
 * kern_pool_flatten_dropout: the N*OH*OW of planes c*N .. c*N+N-1 (count <= 2^32 - 1). Each pooled output:
 * - takes its gradient from the flattened dy [N][C*OH*OW], times mask unless NULL (kern_dropout_unflatten's
 *   product);
 * - writes its window of dx as kern_relu_maxpool2_grad does: the ReLU's gradient at the argmax, zeros elsewhere;
 * - also writes, for the last window of a row, the columns after it up to ld, and for the last row of windows
 *   the rows below it, so that every element of dx is written once;
 * - adds what it wrote to the lane's sum.
 * That sum is channel c's share of the bias gradient of the convolution the pool follows (net's conv2, whose bias
 * follows the pool), from a quarter of the values, in the same pass (the fused pool:
 * docs/gpu.md#variants-for-measurement). */
static inline HD double kern_lane_pool_grad(uint32_t c, const float *dy, const float *mask, const float *y,
                                            const int32_t *arg, float *dx, size_t lo, size_t hi, int C, int N, int H,
                                            int W, int ld, unsigned lane)
{
    uint32_t OH = (uint32_t)H / 2, OW = (uint32_t)W / 2, OP = OH * OW, L = (uint32_t)ld;
    size_t first = (size_t)c * (size_t)N, per = (size_t)C * OP; /* the channel's first plane; a sample's dy */
    double s = 0.0;
    for (size_t e = lo + lane; e < hi; e += KERN_LANES) {
        uint32_t n = (uint32_t)e / OP, q = (uint32_t)e - n * OP, ph = q / OW, pw = q - ph * OW;
        size_t o = first * OP + e, fj = n * per + (size_t)c * OP + q;
        int32_t at = arg[o];
        float g = op_relu_grad(mask ? dy[fj] * mask[fj] : dy[fj], y[o]), *plane = dx + (first + n) * (size_t)H * L;
        uint32_t r1 = ph + 1 == OH ? (uint32_t)H : 2 * ph + 2, c1 = pw + 1 == OW ? L : 2 * pw + 2;
        for (uint32_t r = 2 * ph; r < r1; r++)
            for (uint32_t col = 2 * pw; col < c1; col++) {
                int hit = at == (int32_t)(r * L + col);
                plane[r * L + col] = hit ? g : 0.0f;
                s += hit ? (double)g : 0.0;
            }
    }
    return s;
}

/* Its second pass for sum c: dw or db += its slices' partials. */
static inline HD void kern_conv1_grad_finish(size_t c, const double *part, int slices, float *dw, float *db, int FK)
{
    float *out = c < (size_t)FK ? dw + c : db + (c - (size_t)FK);
    *out += (float)op_partials_sum(part + c * (size_t)slices, slices);
}

/* Second pass of sum_add for channel c (one thread per channel): out[c] += its slices' partials. */
static inline HD void kern_sum_finish(size_t c, const double *part, int slices, float *out)
{
    out[c] += (float)op_partials_sum(part + c * (size_t)slices, slices);
}

/* Second pass of BatchNorm's training statistics, in each block (c, s) of the elementwise pass: channel c's mean
 * and invstd from its slices (op_moments_combine), rounded as the CPU rounds them, into st[0] and st[1]. With
 * `update` (block (c, 0) only) they are also stored, and the running statistics updated as
 * cpu_batchnorm_forward_train does. tracked: NULL but in the launch holding channel 0. */
static inline HD void kern_bn_stats_finish(size_t c, const double *sum, const double *m2, int slices, size_t count,
                                           float momentum, float eps, float st[2], int update, float *mean,
                                           float *invstd, float *rmean, float *rvar, float *tracked)
{
    double mu, var;
    op_moments_combine(sum + c * (size_t)slices, m2 + c * (size_t)slices, slices, count, &mu, &var);
    st[0] = (float)mu;
    st[1] = op_bn_invstd(var, eps);
    if (!update)
        return;
    mean[c] = st[0];
    invstd[c] = st[1];
    rmean[c] = op_bn_running(rmean[c], mu, momentum);
    rvar[c] = op_bn_running(rvar[c], var * (double)count / (double)(count - 1), momentum);
    if (c == 0 && tracked)
        *tracked += 1.0f;
}

/* Second pass of BatchNorm's backward sums, in each block (c, s) of the elementwise pass: the means
 * op_bn_grad takes, mean(dy) and mean(dy xhat), into st[0] and st[1]; with `update` (block (c, 0) only)
 * dgamma[c] and dbeta[c] += the sums. */
static inline HD void kern_bn_grad_finish(size_t c, const double *pa, const double *pb, int slices, size_t count,
                                          float st[2], int update, float *dgamma, float *dbeta)
{
    double a = op_partials_sum(pa + c * (size_t)slices, slices), b = op_partials_sum(pb + c * (size_t)slices, slices);
    st[0] = (float)(a / (double)count);
    st[1] = (float)(b / (double)count);
    if (!update)
        return;
    dgamma[c] += (float)b;
    dbeta[c] += (float)a;
}

/* net's training head (head.h) in five phases, each over its indices i < kern_head_count(a, phase), with a
 * barrier between phases (one GPU block; tests/unit/check_fused.c runs them in loops):
 * - 0, i < N*D: fc1's bias, the ReLU and the dropout of h[i] (dropout_forward's mask, not stored: h > 0 after it
 *   means kept);
 * - 1, i < N*K: the logit z[i], the layer's products summed in order, then its bias (fill, then GEMM with beta 1);
 * - 2, i < N: sample i's log-softmax, NLL and logit gradients;
 * - 3, i < N*D + K*D + K + 1: dh, then dw (sums over samples in double), db, and last the loss sum in sample
 *   order (cpu_sum_losses);
 * - 4, i < D: fc1's bias gradient, dh's column sums in sample order in double.
 * Indices in 32 bits: N*D is a batch of fc1's outputs. */
enum { KERN_HEAD_PHASES = 5 };

static inline HD uint32_t kern_head_count(const nn_head *a, int phase)
{
    uint32_t N = (uint32_t)a->N, D = (uint32_t)a->D, K = (uint32_t)a->K;
    return phase == 0 ? N * D : phase == 1 ? N * K : phase == 2 ? N : phase == 3 ? N * D + K * D + K + 1 : D;
}

static inline HD void kern_head_grad(uint32_t i, const nn_head *a)
{
    uint32_t N = (uint32_t)a->N, D = (uint32_t)a->D, K = (uint32_t)a->K;
    if (i < N * D) { /* through the layer, the dropout (1/(1-p) where kept) and the ReLU */
        uint32_t n = i / D, j = i - n * D;
        float s = 0.0f;
        for (uint32_t k = 0; k < K; k++)
            s += a->dz[n * K + k] * a->w[k * D + j];
        a->dh[i] = a->h[i] > 0.0f ? s * op_dropout_scale(a->p) : 0.0f;
    } else if ((i -= N * D) < K * D) {
        uint32_t k = i / D, j = i - k * D;
        double s = 0.0;
        for (uint32_t n = 0; n < N; n++)
            s += (double)a->dz[n * K + k] * (double)a->h[n * D + j];
        a->dw[i] += (float)s;
    } else if ((i -= K * D) < K) {
        double s = 0.0;
        for (uint32_t n = 0; n < N; n++)
            s += (double)a->dz[n * K + i];
        a->db[i] += (float)s;
    } else {
        double s = 0.0;
        for (uint32_t n = 0; n < N; n++)
            s += a->loss[n];
        *a->loss_sum += s;
    }
}

static inline HD void kern_head(int phase, uint32_t i, const nn_head *a)
{
    uint32_t D = (uint32_t)a->D, K = (uint32_t)a->K;
    if (phase == 0) {
        uint32_t n = i / D, j = i - n * D;
        a->h[i] = op_relu(a->h[i] + a->hb[j]) * op_dropout_mask(op_dropout_key(a->key, a->ids[n], a->layer), j,
                                                                op_dropout_threshold(a->p), op_dropout_scale(a->p));
    } else if (phase == 1) {
        uint32_t n = i / K, k = i - n * K;
        float s = 0.0f;
        for (uint32_t j = 0; j < D; j++)
            s += a->h[n * D + j] * a->w[k * D + j];
        a->z[i] = s + a->b[k];
    } else if (phase == 2) {
        a->loss[i] = op_log_softmax_nll(a->z + i * K, a->K, a->labels[i], a->logp + i * K);
        for (uint32_t k = 0; k < K; k++)
            a->dz[i * K + k] = op_log_softmax_nll_grad(a->logp + i * K, a->labels[i], (int)k, a->g);
    } else if (phase == 3) {
        kern_head_grad(i, a);
    } else {
        double s = 0.0;
        for (uint32_t n = 0; n < (uint32_t)a->N; n++)
            s += a->dh[n * D + i];
        a->dhb[i] += (float)s;
    }
}
#endif
