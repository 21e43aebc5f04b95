#include "nn/cpu/nn_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "nn/cpu/conv_cpu.h"
#include "base/errors.h"
#include "nn/cpu/gemm.h"
#include "nn/layers.h"
#include "data/mnist.h"
#include "nn/ops.h"
#include "nn/cpu/simd.h"
#include "base/threads.h"

static void *cpu_alloc(size_t bytes) { return xmalloc_aligned(bytes); }

static void cpu_free(void *p) { free(p); }

static void cpu_zero(void *p, size_t bytes)
{
    enum { BLOCK = 1 << 16 };
    PARALLEL_FOR
    for (size_t at = 0; at < bytes; at += BLOCK)
        memset((char *)p + at, 0, bytes - at < BLOCK ? bytes - at : BLOCK);
}

static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

/* op_normalize of every byte value: a pixel costs a table lookup instead of two divisions. */
static void normalize_table(float table[256])
{
    for (int v = 0; v < 256; v++)
        table[v] = op_normalize((uint8_t)v);
}

static void normalize_with(const float table[256], const uint8_t *images, size_t count, float *x)
{
    for (size_t i = 0; i < count; i++)
        x[i] = table[images[i]];
}

void cpu_normalize(const uint8_t *images, size_t count, float *x)
{
    float table[256];
    normalize_table(table);
    normalize_with(table, images, count, x);
}

void cpu_gather(const uint8_t *images, const uint8_t *labels, const uint64_t *idx, int n, float *x, uint8_t *y)
{
    float table[256];
    normalize_table(table);
    for (int i = 0; i < n; i++) {
        uint64_t s = idx ? idx[i] : (uint64_t)i;
        normalize_with(table, images + s * MNIST_PIXELS, MNIST_PIXELS, x + (size_t)i * MNIST_PIXELS);
        if (y)
            y[i] = labels[s];
    }
}

/* col [C*k*k][ns*OH*OW] for samples n0 .. n0+ns-1 of x [C][N][H][W]: per output row, zeros for
 * the padding and one contiguous copy of the input row. */
static void im2col(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns)
{
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad);
    size_t P = (size_t)OH * OW, ld = ns * P;
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < k; kh++)
            for (int kw = 0; kw < k; kw++) {
                float *row = col + ((size_t)(c * k + kh) * k + kw) * ld;
                int oh_lo = op_span_lo(kh - pad), oh_hi = op_span_hi(kh - pad, H);
                int ow_lo = op_span_lo(kw - pad), ow_hi = op_span_hi(kw - pad, W);
                ow_hi = ow_hi < OW ? ow_hi : OW;
                for (int n = 0; n < ns; n++) {
                    const float *plane = x + ((size_t)c * N + n0 + n) * H * W;
                    for (int oh = 0; oh < OH; oh++) {
                        float *out = row + n * P + (size_t)oh * OW;
                        if (oh < oh_lo || oh >= oh_hi) {
                            for (int ow = 0; ow < OW; ow++)
                                out[ow] = 0.0f;
                            continue;
                        }
                        const float *src = plane + (oh + kh - pad) * W + kw - pad;
                        for (int ow = 0; ow < ow_lo; ow++)
                            out[ow] = 0.0f;
                        SIMD /* rows are short: a loop beats a memcpy call */
                        for (int ow = ow_lo; ow < ow_hi; ow++)
                            out[ow] = src[ow];
                        for (int ow = ow_hi; ow < OW; ow++)
                            out[ow] = 0.0f;
                    }
                }
            }
}

/* dx [C][N][H][W] for samples n0 .. n0+ns-1 from dcol laid out as im2col's col: each input row
 * gathers its taps in op_col2im's order (kh, then kw), so the sums match it bit for bit. */
static void col2im(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns)
{
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad);
    size_t P = (size_t)OH * OW, ld = ns * P;
    for (int c = 0; c < C; c++)
        for (int n = 0; n < ns; n++) {
            const float *src = dcol + (size_t)c * k * k * ld + n * P;
            float *plane = dx + ((size_t)c * N + n0 + n) * H * W;
            for (int ih = 0; ih < H; ih++) {
                float *out = plane + (size_t)ih * W;
                for (int iw = 0; iw < W; iw++)
                    out[iw] = 0.0f;
                for (int kh = 0; kh < k; kh++) {
                    int oh = ih + pad - kh;
                    if (ih < op_span_lo(pad - kh) || ih >= op_span_hi(pad - kh, OH))
                        continue;
                    for (int kw = 0; kw < k; kw++) {
                        const float *tap = src + (size_t)(kh * k + kw) * ld + (size_t)oh * OW + pad - kw;
                        int lo = op_span_lo(pad - kw), hi = op_span_hi(pad - kw, OW);
                        hi = hi < W ? hi : W;
                        SIMD
                        for (int iw = lo; iw < hi; iw++)
                            out[iw] += tap[iw];
                    }
                }
            }
        }
}

/* Wide layout (pad 0, see op_wide_offset): per tap and plane one contiguous copy; the junk
 * offsets past op_wide_span would read beyond the plane and get zeros. */
static void im2col_wide(const float *x, float *col, int N, int C, int H, int W, int k, int n0, int ns)
{
    int OH = conv_out(H, k, 0);
    size_t P = (size_t)OH * W, span = (size_t)op_wide_span(OH, W, k), ld = ns * P;
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < k; kh++)
            for (int kw = 0; kw < k; kw++) {
                float *row = col + ((size_t)(c * k + kh) * k + kw) * ld;
                for (int n = 0; n < ns; n++) {
                    const float *src = x + ((size_t)c * N + n0 + n) * H * W + op_wide_offset(kh, kw, W);
                    memcpy(row + n * P, src, span * sizeof *src);
                    for (size_t j = span; j < P; j++)
                        row[n * P + j] = 0.0f;
                }
            }
}

/* The input gradient from a wide dcol: per plane, the taps in op_col2im's order, each one span.
 * Junk columns of dcol are exact zeros (w^T times zero dy columns) and land on real pixels of the
 * next row, where adding 0 changes nothing. */
static void col2im_wide(const float *dcol, float *dx, int N, int C, int H, int W, int k, int n0, int ns)
{
    int OH = conv_out(H, k, 0);
    size_t P = (size_t)OH * W, span = (size_t)op_wide_span(OH, W, k), ld = ns * P;
    for (int c = 0; c < C; c++)
        for (int n = 0; n < ns; n++) {
            float *plane = dx + ((size_t)c * N + n0 + n) * H * W;
            memset(plane, 0, (size_t)H * W * sizeof *plane);
            for (int kh = 0; kh < k; kh++)
                for (int kw = 0; kw < k; kw++) {
                    const float *tap = dcol + ((size_t)(c * k + kh) * k + kw) * ld + n * P;
                    float *out = plane + op_wide_offset(kh, kw, W);
                    SIMD
                    for (size_t j = 0; j < span; j++)
                        out[j] += tap[j];
                }
        }
}

void cpu_im2col(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide)
{
    if (wide)
        im2col_wide(x, col, N, C, H, W, k, n0, ns);
    else
        im2col(x, col, N, C, H, W, k, pad, n0, ns);
}

void cpu_col2im(const float *dcol, float *dx, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide)
{
    if (wide)
        col2im_wide(dcol, dx, N, C, H, W, k, n0, ns);
    else
        col2im(dcol, dx, N, C, H, W, k, pad, n0, ns);
}

void cpu_fill(float *y, const float *b, int rows, size_t cols, size_t ld, int by_row)
{
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ld;
        if (by_row)
            for (size_t j = 0; j < cols; j++)
                yr[j] = b[r];
        else
            memcpy(yr, b, cols * sizeof *b);
    }
}

/* op_sum of SUM_GROUP channels at once: one channel's four lanes form a chain of dependent additions
 * (latency bound); interleaving channels keeps several chains in flight, each in op_sum's order. */
enum { SUM_GROUP = 4 };

static inline __attribute__((always_inline)) void sum_group(float *out, const float *x, size_t count, size_t cstride,
                                                            size_t stride)
{
    double s[SUM_GROUP][4] = {{0.0}};
    size_t i = 0;
    for (; i + 4 <= count; i += 4) {
#pragma GCC unroll 4 /* the accumulators stay in registers only when the group is unrolled */
        for (int c = 0; c < SUM_GROUP; c++)
            op_sum_step(s[c], x + c * cstride, i, stride);
    }
    for (int c = 0; c < SUM_GROUP; c++)
        out[c] += op_sum_finish(s[c], x + c * cstride, i, count, stride);
}

void cpu_sum_add(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride)
{
    int groups = channels / SUM_GROUP;
    PARALLEL_FOR
    for (int g = 0; g < groups; g++) {
        int c = g * SUM_GROUP;
        if (stride == 1) /* contiguous planes (convolutions): a constant stride lets the compiler vectorise */
            sum_group(out + c, x + (size_t)c * cstride, count, cstride, 1);
        else
            sum_group(out + c, x + (size_t)c * cstride, count, cstride, stride);
    }
    for (int c = groups * SUM_GROUP; c < channels; c++)
        out[c] += op_sum(x + (size_t)c * cstride, count, stride);
}

void cpu_relu_forward(float *x, size_t count)
{
    PARALLEL_SIMD
    for (size_t i = 0; i < count; i++)
        x[i] = op_relu(x[i]);
}

void cpu_bias_relu_forward(float *x, const float *b, int C, size_t count)
{
    PARALLEL_FOR
    for (int c = 0; c < C; c++) {
        float *xc = x + c * count;
        SIMD
        for (size_t i = 0; i < count; i++)
            xc[i] = op_bias_relu(xc[i], b[c]);
    }
}

void cpu_add_grads(float *dw, float *db, const float *dw_sum, const float *db_sum, size_t nw, int nb)
{
    for (size_t i = 0; i < nw; i++)
        dw[i] += dw_sum[i];
    for (int f = 0; f < nb; f++)
        db[f] += db_sum[f];
}

void cpu_relu_backward(float *dy, const float *y, size_t count)
{
    PARALLEL_SIMD
    for (size_t i = 0; i < count; i++)
        dy[i] = op_relu_grad(dy[i], y[i]);
}

/* One plane [H][ld] of 2x2 max-pooling into yp [H/2][W/2] with its argmaxes. */
static inline void maxpool2_plane(const float *xp, float *yp, int32_t *ap, int H, int W, int ld)
{
    int OH = H / 2, OW = W / 2;
    for (int ph = 0; ph < OH; ph++) {
        SIMD /* branch-free selects */
        for (int pw = 0; pw < OW; pw++)
            yp[ph * OW + pw] = op_maxpool2(xp, ld, ph, pw, ap + ph * OW + pw);
    }
}

static inline void maxpool2_grad_plane(const float *dyp, const int32_t *ap, float *dxp, int H, int W, int ld)
{
    int OH = H / 2, OW = W / 2;
    for (int ph = 0; ph < OH; ph++) {
        SIMD
        for (int pw = 0; pw < OW; pw++)
            op_maxpool2_grad(dxp, dyp, ap, ld, OW, ph, pw);
    }
    /* Columns and an odd last row in no window. */
    for (int ih = 0; ih < H; ih++)
        for (int iw = ih < 2 * OH ? 2 * OW : 0; iw < ld; iw++)
            dxp[ih * ld + iw] = 0.0f;
}

void cpu_maxpool2_forward(const float *x, float *y, int32_t *arg, int planes, int H, int W, int ld)
{
    size_t P = (size_t)(H / 2) * (W / 2);
    PARALLEL_FOR
    for (int p = 0; p < planes; p++)
        maxpool2_plane(x + (size_t)p * H * ld, y + p * P, arg + p * P, H, W, ld);
}

void cpu_maxpool2_backward(const float *dy, const int32_t *arg, float *dx, int planes, int H, int W, int ld)
{
    size_t P = (size_t)(H / 2) * (W / 2);
    PARALLEL_FOR
    for (int p = 0; p < planes; p++)
        maxpool2_grad_plane(dy + p * P, arg + p * P, dx + (size_t)p * H * ld, H, W, ld);
}

WIDE_CLONES void cpu_dropout_forward(float *x, float *mask, int N, int D, const uint64_t *ids, uint64_t key, int layer,
                                     float p)
{
    float scale = op_dropout_scale(p);
    uint32_t threshold = op_dropout_threshold(p);
    PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        uint64_t skey = op_dropout_key(key, ids[n], layer);
        float *xn = x + (size_t)n * D, *mn = mask + (size_t)n * D;
        SIMD /* 64-bit multiplies of the generator included */
        for (int e = 0; e < D; e++) {
            mn[e] = op_dropout_mask(skey, (uint64_t)e, threshold, scale);
            xn[e] *= mn[e];
        }
    }
}

void cpu_dropout_backward(float *dy, const float *mask, size_t count)
{
    PARALLEL_SIMD
    for (size_t i = 0; i < count; i++)
        dy[i] *= mask[i];
}

void cpu_flatten_cnhw(const float *x, float *y, int C, int N, int HW)
{
    PARALLEL_FOR
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++)
            memcpy(y + ((size_t)n * C + c) * HW, x + ((size_t)c * N + n) * HW, (size_t)HW * sizeof *x);
}

void cpu_unflatten_cnhw(const float *y, float *x, int C, int N, int HW)
{
    PARALLEL_FOR
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++)
            memcpy(x + ((size_t)c * N + n) * HW, y + ((size_t)n * C + c) * HW, (size_t)HW * sizeof *x);
}

/* The fused entries of backend.h. The pool and its ReLU run as the pairs they fuse, plane by plane: a
 * second pass over a cached plane costs little. Flatten and dropout, whose buffers outgrow L2, are one
 * pass. tests/unit/check_fused.c: the same bits as the pairs, and as the GPU's fused bodies. */
void cpu_maxpool2_relu_forward(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                               int ld)
{
    size_t P = (size_t)(H / 2) * (W / 2);
    PARALLEL_FOR
    for (int p = 0; p < C * N; p++) { /* the ReLU while the pooled plane is in cache */
        float *yp = y + p * P;
        maxpool2_plane(x + (size_t)p * H * ld, yp, arg + p * P, H, W, ld);
        if (b) {
            SIMD
            for (size_t i = 0; i < P; i++)
                yp[i] = op_bias_relu(yp[i], b[p / N]);
        } else {
            SIMD
            for (size_t i = 0; i < P; i++)
                yp[i] = op_relu(yp[i]);
        }
    }
}

void cpu_relu_maxpool2_backward(float *dy, const float *y, const int32_t *arg, float *dx, int planes, int H, int W,
                                int ld)
{
    size_t P = (size_t)(H / 2) * (W / 2);
    PARALLEL_FOR
    for (int p = 0; p < planes; p++) { /* the ReLU's gradient in place, then pooled back, plane by plane */
        float *dyp = dy + p * P;
        const float *yp = y + p * P;
        SIMD
        for (size_t i = 0; i < P; i++)
            dyp[i] = op_relu_grad(dyp[i], yp[i]);
        maxpool2_grad_plane(dyp, arg + p * P, dx + (size_t)p * H * ld, H, W, ld);
    }
}

/* Flatten and dropout in one pass: each element is read once and written once (with its mask), where the
 * pair wrote y and read it back (2.4 MB each way per step of 64 in net, more than L2 holds). */
WIDE_CLONES void cpu_flatten_dropout_forward(const float *x, float *y, float *mask, int C, int N, int HW,
                                             const uint64_t *ids, uint64_t key, int layer, float p)
{
    if (!mask) {
        cpu_flatten_cnhw(x, y, C, N, HW);
        return;
    }
    size_t D = (size_t)C * HW;
    float scale = op_dropout_scale(p);
    uint32_t threshold = op_dropout_threshold(p);
    PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        uint64_t skey = op_dropout_key(key, ids[n], layer);
        for (int c = 0; c < C; c++) {
            const float *xp = x + ((size_t)c * N + n) * HW;
            size_t at = (size_t)n * D + (size_t)c * HW;
            float *yp = y + at, *mp = mask + at;
            SIMD /* 64-bit multiplies of the generator included */
            for (int e = 0; e < HW; e++) {
                mp[e] = op_dropout_mask(skey, (uint64_t)c * HW + (uint64_t)e, threshold, scale);
                yp[e] = xp[e] * mp[e];
            }
        }
    }
}

void cpu_dropout_unflatten_backward(float *dy, const float *mask, float *dx, int C, int N, int HW)
{
    if (!mask) {
        cpu_unflatten_cnhw(dy, dx, C, N, HW);
        return;
    }
    size_t D = (size_t)C * HW;
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            size_t at = (size_t)n * D + (size_t)c * HW;
            float *dxp = dx + ((size_t)c * N + n) * HW;
            const float *dyp = dy + at, *mp = mask + at;
            SIMD
            for (int e = 0; e < HW; e++)
                dxp[e] = dyp[e] * mp[e];
        }
}

void cpu_batchnorm_forward_train(const float *x, const float *gamma, const float *beta, float *y, float *mean,
                                 float *invstd, float *running_mean, float *running_var, float *tracked, int C,
                                 size_t count, float momentum, float eps)
{
    *tracked += 1.0f;
    for (int c = 0; c < C; c++) {
        const float *xc = x + c * count;
        float *yc = y + c * count;
        double mu, var;
        op_bn_stats(xc, count, &mu, &var);
        mean[c] = (float)mu;
        invstd[c] = op_bn_invstd(var, eps);
        running_mean[c] = op_bn_running(running_mean[c], mu, momentum);
        running_var[c] = op_bn_running(running_var[c], var * (double)count / (double)(count - 1), momentum);
        for (size_t i = 0; i < count; i++)
            yc[i] = op_bn(xc[i], mean[c], invstd[c], gamma[c], beta[c]);
    }
}

void cpu_batchnorm_forward_eval(const float *x, const float *gamma, const float *beta, const float *running_mean,
                                const float *running_var, float *y, int C, size_t count, float eps)
{
    for (int c = 0; c < C; c++) {
        float invstd = op_bn_invstd(running_var[c], eps);
        for (size_t i = 0; i < count; i++)
            y[c * count + i] = op_bn(x[c * count + i], running_mean[c], invstd, gamma[c], beta[c]);
    }
}

void cpu_batchnorm_backward(const float *x, const float *dy, const float *gamma, const float *mean, const float *invstd,
                            float *dx, float *dgamma, float *dbeta, int C, size_t count)
{
    for (int c = 0; c < C; c++) {
        const float *xc = x + c * count, *dyc = dy + c * count;
        double sum_dy, sum_dy_xhat;
        op_bn_grad_sums(xc, dyc, count, mean[c], invstd[c], &sum_dy, &sum_dy_xhat);
        dgamma[c] += (float)sum_dy_xhat;
        dbeta[c] += (float)sum_dy;
        float mean_dy = (float)(sum_dy / (double)count), mean_dy_xhat = (float)(sum_dy_xhat / (double)count);
        for (size_t i = 0; i < count; i++)
            dx[c * count + i] = op_bn_grad(xc[i], dyc[i], mean[c], invstd[c], gamma[c], mean_dy, mean_dy_xhat);
    }
}

void cpu_log_softmax_nll_forward(const float *z, const uint8_t *labels, float *logp, float *loss, int N, int K)
{
    for (int n = 0; n < N; n++)
        loss[n] = op_log_softmax_nll(z + (size_t)n * K, K, labels[n], logp + (size_t)n * K);
}

double cpu_sum_losses(const float *loss, int N)
{
    double s = 0.0;
    for (int n = 0; n < N; n++)
        s += loss[n];
    return s;
}

void cpu_add_losses(const float *loss, int N, double *sum) { *sum += cpu_sum_losses(loss, N); }

void cpu_log_softmax_nll_backward(const float *logp, const uint8_t *labels, float *dz, int N, int K, float g)
{
    for (int n = 0; n < N; n++)
        for (int j = 0; j < K; j++)
            dz[(size_t)n * K + j] = op_log_softmax_nll_grad(logp + (size_t)n * K, labels[n], j, g);
}

long cpu_count_correct(const float *z, const uint8_t *labels, int N, int K)
{
    long correct = 0;
    for (int n = 0; n < N; n++)
        correct += op_argmax(z + (size_t)n * K, K) == labels[n];
    return correct;
}

/* The optimizer's loops, vectorised: the test for a buffer to clear stays out of them, since a store under a
 * condition kept the loop scalar (slower: docs/performance.md). Contraction off, so that every clone computes the
 * same bits: the multiplies and adds as written, square roots and divisions rounded correctly in any ISA. */
EXACT_WIDE_CLONES void cpu_adadelta_step(float *param, const float *grad, float *square_avg, float *acc_delta, size_t n,
                                         float lr, float rho, float eps, float weight_decay, float *clear)
{
    if (clear) {
        PARALLEL_SIMD
        for (size_t i = 0; i < n; i++) {
            op_adadelta(param, grad, square_avg, acc_delta, i, lr, rho, eps, weight_decay);
            clear[i] = 0.0f;
        }
    } else {
        PARALLEL_SIMD
        for (size_t i = 0; i < n; i++)
            op_adadelta(param, grad, square_avg, acc_delta, i, lr, rho, eps, weight_decay);
    }
}

EXACT_WIDE_CLONES void cpu_sgd_step(float *param, const float *grad, float *buf, size_t n, float lr, float momentum,
                                    float weight_decay, float *clear)
{
    if (clear) {
        PARALLEL_SIMD
        for (size_t i = 0; i < n; i++) {
            op_sgd(param, grad, buf, i, lr, momentum, weight_decay);
            clear[i] = 0.0f;
        }
    } else {
        PARALLEL_SIMD
        for (size_t i = 0; i < n; i++)
            op_sgd(param, grad, buf, i, lr, momentum, weight_decay);
    }
}

/* Samples per im2col + GEMM. One sample keeps conv2's im2col block (~0.7 MB) in L2 while its GEMM
 * (64 x 624 x 288) is still efficient. Chunks of 1 or 2 are fastest; one batch-wide GEMM (a 46 MB block) is
 * slower (docs/performance.md). */
const nn_backend nn_cpu = {
    .name = "cpu",
    .chunk = 1,
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = cpu_zero,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .gather = cpu_gather,
    .gemm = gemm,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .fill = cpu_fill,
    .sum_add = cpu_sum_add,
    .relu_forward = cpu_relu_forward,
    .bias_relu_forward = cpu_bias_relu_forward,
    .relu_backward = cpu_relu_backward,
    .maxpool2_relu_forward = cpu_maxpool2_relu_forward,
    .relu_maxpool2_backward = cpu_relu_maxpool2_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .flatten_dropout_forward = cpu_flatten_dropout_forward,
    .dropout_unflatten_backward = cpu_dropout_unflatten_backward,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_eval = cpu_batchnorm_forward_eval,
    .batchnorm_backward = cpu_batchnorm_backward,
    .log_softmax_nll_forward = cpu_log_softmax_nll_forward,
    .log_softmax_nll_backward = cpu_log_softmax_nll_backward,
    .add_losses = cpu_add_losses,
    .count_correct = cpu_count_correct,
    .adadelta_step = cpu_adadelta_step,
    .sgd_step = cpu_sgd_step,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
};
