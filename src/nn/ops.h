/* The model's elementwise and reduction math, one output element (or one channel / sample row for
 * reductions) per call. nn_cpu.c runs these in plain loops; CUDA kernels call the same functions
 * from grid-stride loops, so the CPU tests check the GPU math. Rules: pure functions of their
 * arguments, no allocation, no static state, no host-only library calls. Index decomposition
 * (which element a thread owns) is the caller's job; the functions get coordinates. */
#ifndef MNIST_OPS_H
#define MNIST_OPS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "base/host_device.h"
#include "base/rng.h"

/* torchvision ToTensor + Normalize((0.1307,), (0.3081,)), in the same float operations. */
static inline HD float op_normalize(uint8_t v) { return ((float)v / 255.0f - 0.1307f) / 0.3081f; }

/* Element i of a tensor initialised U(-bound, bound). */
static inline HD float op_init_uniform(uint64_t key, uint64_t i, float bound)
{
    return (2.0f * rng_uniform(key, i) - 1.0f) * bound;
}

static inline HD float op_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* relu(x + b): a convolution's bias and activation in one pass. */
static inline HD float op_bias_relu(float x, float b) { return op_relu(x + b); }

/* Gradient through a ReLU given its output y (y > 0 exactly where the input was). */
static inline HD float op_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/* Stride-1 convolution index math, one dimension at a time. im2col: output o reads input
 * i = o + d through tap t, d = t - pad; col2im: input i gathers from output o = i + d, d = pad - t.
 * The target index is inside [0, size) exactly for o in [op_span_lo(d), op_span_hi(d, size)); the
 * CPU copies these spans row by row, a GPU thread per element uses op_im2col / op_col2im. */
static inline HD int op_span_lo(int d) { return d < 0 ? -d : 0; }

static inline HD int op_span_hi(int d, int size) { return size - d; }

/* Output size of a stride-1 convolution; the macro serves constant expressions (model geometry). */
#define CONV_OUT(size, k, pad) ((size) + 2 * (pad) - (k) + 1)
static inline HD int conv_out(int size, int k, int pad) { return CONV_OUT(size, k, pad); }

/* A convolution's output rows are this long: OW, or W in the wide layout (below); its planes hold OH of them. */
static inline HD int conv_ld(int W, int k, int pad, int wide) { return wide ? W : conv_out(W, k, pad); }

static inline HD size_t conv_plane(int H, int W, int k, int pad, int wide)
{
    return (size_t)conv_out(H, k, pad) * conv_ld(W, k, pad, wide);
}

/* The wide layout (pad 0, output rows as long as input rows W, the last k-1 columns junk): output
 * offset j = oh W + ow of a plane reads input offset j + op_wide_offset(kh, kw, W) through tap
 * (kh, kw). So a tap is one contiguous span per plane; offsets j < op_wide_span(OH, W, k) stay
 * inside the input plane. */
static inline HD int op_wide_offset(int kh, int kw, int W) { return kh * W + kw; }

static inline HD int op_wide_span(int OH, int W, int k) { return OH * W - (k - 1); }

/* im2col entry for tap (kh, kw) at output (oh, ow): the pixel of input plane [H][W] (one channel
 * of one sample), or 0 in the padding. */
static inline HD float op_im2col(const float *plane, int H, int W, int pad, int kh, int kw, int oh, int ow)
{
    int ih = oh + kh - pad, iw = ow + kw - pad;
    return (ih >= 0 && ih < H && iw >= 0 && iw < W) ? plane[ih * W + iw] : 0.0f;
}

/* col2im, gather form (no atomics): gradient of input pixel (ih, iw) = sum over the k*k taps that
 * read it, in tap order (kh, then kw). dcol points at row (channel, tap 0) and column (sample,
 * output 0); tap rows are ld apart and each holds the sample's [OH][OW] outputs. */
static inline HD float op_col2im(const float *dcol, size_t ld, int k, int pad, int OH, int OW, int ih, int iw)
{
    float s = 0.0f;
    for (int kh = 0; kh < k; kh++) {
        int oh = ih + pad - kh;
        if (oh < 0 || oh >= OH)
            continue;
        for (int kw = 0; kw < k; kw++) {
            int ow = iw + pad - kw;
            if (ow >= 0 && ow < OW)
                s += dcol[(size_t)(kh * k + kw) * ld + (size_t)(oh * OW + ow)];
        }
    }
    return s;
}

/* One step of a max scan: v at index i replaces the running maximum if larger or NaN (as in
 * PyTorch); selects rather than branches, since comparisons of activations are unpredictable. */
static inline HD void op_max_step(float v, int i, float *m, int *arg)
{
    int take = (v > *m) | (v != v);
    *m = take ? v : *m;
    *arg = take ? i : *arg;
}

/* The first maximum of a 2x2 window's values v0 v1 / v2 v3 (rows ld apart, v0 at plane index i), scanned
 * in that order; *arg gets its plane index. */
static inline HD float op_max4(float v0, float v1, float v2, float v3, int i, int ld, int32_t *arg)
{
    int best = i;
    float m = v0;
    op_max_step(v1, i + 1, &m, &best);
    op_max_step(v2, i + ld, &m, &best);
    op_max_step(v3, i + ld + 1, &m, &best);
    *arg = best;
    return m;
}

/* 2x2 max-pool, stride 2: output (ph, pw) of a plane with row length W; *arg gets the plane index
 * of the first maximum. */
static inline HD float op_maxpool2(const float *plane, int W, int ph, int pw, int32_t *arg)
{
    int i = 2 * ph * W + 2 * pw;
    return op_max4(plane[i], plane[i + 1], plane[i + W], plane[i + W + 1], i, W, arg);
}

/* A pooled output's gradient reaches the window element at plane index i only if it was the argmax a. */
static inline HD int op_window_hit(int32_t a, int i) { return a == i; }
static inline HD float op_window_grad(float g, int32_t a, int i) { return op_window_hit(a, i) ? g : 0.0f; }

/* 2x2 max-pool backward for output (ph, pw) of a plane: writes the whole window of dx_plane, the
 * gradient at the argmax and 0 elsewhere (windows do not overlap: no atomics, no prior zeroing). */
static inline HD void op_maxpool2_grad(float *dx_plane, const float *dy_plane, const int32_t *arg_plane, int W, int OW,
                                       int ph, int pw)
{
    int o = ph * OW + pw, i = 2 * ph * W + 2 * pw, a = arg_plane[o];
    float g = dy_plane[o];
    dx_plane[i] = op_window_grad(g, a, i);
    dx_plane[i + 1] = op_window_grad(g, a, i + 1);
    dx_plane[i + W] = op_window_grad(g, a, i + W);
    dx_plane[i + W + 1] = op_window_grad(g, a, i + W + 1);
}

/* Dropout: the key of one sample in one dropout layer; element e of that sample is kept iff its
 * draw is >= p, so masks depend on (key, global sample index, layer, element) only. */
static inline HD uint64_t op_dropout_key(uint64_t dropout_key, uint64_t id, int layer)
{
    return rng_key(rng_key(dropout_key, id), (uint64_t)layer);
}

/* The draw rng_uniform(sample_key, e) is its 24 bits rng_u64 >> 40 times 2^-24 exactly. So draw >= p
 * iff those bits >= this threshold, the least t with t 2^-24 >= p (p in [0, 1]; p * 2^24 is exact).
 * That is an integer comparison, which a CPU vectorises, where the float draw needs a 64-bit conversion. */
static inline HD uint32_t op_dropout_threshold(float p) { return p > 0.0f ? (uint32_t)ceilf(p * 16777216.0f) : 0u; }

/* What a kept element is multiplied by (p < 1). */
static inline HD float op_dropout_scale(float p) { return 1.0f / (1.0f - p); }

/* The dropout multiplier of element e: 1/(1-p) (scale) if kept, else 0; forward and backward
 * multiply by it, as torch's input * (bernoulli(1-p) / (1-p)). threshold: op_dropout_threshold(p). */
static inline HD float op_dropout_mask(uint64_t sample_key, uint64_t e, uint32_t threshold, float scale)
{
    return (uint32_t)(rng_u64(sample_key, e) >> 40) >= threshold ? scale : 0.0f;
}

/* Sum of count values stride apart (bias gradients: a CNHW channel plane, or a column of [N][F]),
 * in double so long planes lose no precision. Four independent partial sums keep the additions from
 * waiting on each other: lane j takes the values i = j (mod 4) in order, the last count % 4 go
 * to lane 0. op_sum_step and op_sum_finish are that order in pieces, for callers that interleave
 * several sums (the CPU sums four channels at once) and must match op_sum bit for bit. */
static inline HD void op_sum_step(double s[4], const float *x, size_t i, size_t stride)
{
    for (int j = 0; j < 4; j++)
        s[j] += x[(i + (size_t)j) * stride];
}

/* The values from i (a multiple of 4 with fewer than 4 left) to count, then the lanes combined. */
static inline HD float op_sum_finish(double s[4], const float *x, size_t i, size_t count, size_t stride)
{
    for (; i < count; i++)
        s[0] += x[i * stride];
    return (float)((s[0] + s[1]) + (s[2] + s[3]));
}

static inline HD float op_sum(const float *x, size_t count, size_t stride)
{
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 4 <= count; i += 4)
        op_sum_step(s, x, i, stride);
    return op_sum_finish(s, x, i, count, stride);
}

/* Slice s of `slices` near-equal slices of [0, count): [*lo, *hi). The GPU's per-channel reductions cut
 * a channel into slices (kern_red_slices), each reduced by one block to a partial. */
static inline HD void op_slice(size_t count, int slices, int s, size_t *lo, size_t *hi)
{
    *lo = count * (size_t)s / (size_t)slices;
    *hi = count * (size_t)(s + 1) / (size_t)slices;
}

/* The second pass of those reductions: n partial sums added in index order, so the result does not
 * depend on which block finished first (the same bits on every run). */
static inline HD double op_partials_sum(const double *p, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += p[i];
    return s;
}

/* Mean and biased variance of count values from their slices' sums and sums of squared deviations
 * about the slice's own mean (m2). M2 = sum_s m2_s + n_s (mean_s - mean)^2, every term >= 0, so no
 * cancellation (the two-pass result of op_bn_stats, added in another order). */
static inline HD void op_moments_combine(const double *sum, const double *m2, int slices, size_t count, double *mean,
                                         double *var)
{
    double mu = op_partials_sum(sum, slices) / (double)count, q = 0.0;
    for (int s = 0; s < slices; s++) {
        size_t lo, hi;
        op_slice(count, slices, s, &lo, &hi);
        double n = (double)(hi - lo), d = n > 0.0 ? sum[s] / n - mu : 0.0;
        q += m2[s] + n * d * d;
    }
    *mean = mu;
    *var = q / (double)count;
}

/* BatchNorm statistics of one channel's count contiguous values: mean and biased variance
 * (two passes, in double). */
static inline HD void op_bn_stats(const float *x, size_t count, double *mean, double *var)
{
    double s = 0.0, q = 0.0;
    for (size_t i = 0; i < count; i++)
        s += x[i];
    double mu = s / (double)count;
    for (size_t i = 0; i < count; i++) {
        double d = x[i] - mu;
        q += d * d;
    }
    *mean = mu;
    *var = q / (double)count;
}

static inline HD float op_bn_invstd(double var, float eps) { return (float)(1.0 / sqrt(var + (double)eps)); }

/* running = (1 - momentum) running + momentum stat (stat: batch mean, or unbiased batch variance). */
static inline HD float op_bn_running(float running, double stat, float momentum)
{
    return (float)((double)momentum * stat + (1.0 - (double)momentum) * (double)running);
}

static inline HD float op_bn(float x, float mean, float invstd, float gamma, float beta)
{
    return (x - mean) * invstd * gamma + beta;
}

/* BatchNorm backward reductions of one channel: sum(dy) and sum(dy * xhat). */
static inline HD void op_bn_grad_sums(const float *x, const float *dy, size_t count, float mean, float invstd,
                                      double *sum_dy, double *sum_dy_xhat)
{
    double a = 0.0, b = 0.0;
    for (size_t i = 0; i < count; i++) {
        a += dy[i];
        b += (double)dy[i] * (double)((x[i] - mean) * invstd);
    }
    *sum_dy = a;
    *sum_dy_xhat = b;
}

/* BatchNorm (training mode) input gradient: gamma invstd (dy - mean(dy) - xhat mean(dy xhat)). */
static inline HD float op_bn_grad(float x, float dy, float mean, float invstd, float gamma, float mean_dy,
                                  float mean_dy_xhat)
{
    float xhat = (x - mean) * invstd;
    return gamma * invstd * (dy - mean_dy - xhat * mean_dy_xhat);
}

/* Log-softmax of one sample's K logits into logp; returns that sample's NLL loss (also the
 * cross-entropy of the logits). */
static inline HD float op_log_softmax_nll(const float *z, int K, int label, float *logp)
{
    float m = z[0];
    for (int j = 1; j < K; j++)
        m = z[j] > m ? z[j] : m;
    float s = 0.0f;
    for (int j = 0; j < K; j++)
        s += expf(z[j] - m);
    float lse = logf(s);
    for (int j = 0; j < K; j++)
        logp[j] = z[j] - m - lse;
    return -logp[label];
}

/* Gradient of g * NLL(log_softmax(z)) with respect to logit j. */
static inline HD float op_log_softmax_nll_grad(const float *logp, int label, int j, float g)
{
    return g * (expf(logp[j]) - (j == label ? 1.0f : 0.0f));
}

/* Predicted class of one sample: the first maximum, as torch.argmax. */
static inline HD int op_argmax(const float *z, int K)
{
    int best = 0;
    for (int j = 1; j < K; j++)
        if (z[j] > z[best])
            best = j;
    return best;
}

/* torch.optim.Adadelta (1.13, single-tensor path) on element i. */
static inline HD void op_adadelta(float *param, const float *grad, float *square_avg, float *acc_delta, size_t i,
                                  float lr, float rho, float eps, float weight_decay)
{
    float g = grad[i] + weight_decay * param[i];
    float sq = square_avg[i] * rho + (1.0f - rho) * g * g;
    float delta = sqrtf(acc_delta[i] + eps) / sqrtf(sq + eps) * g;
    square_avg[i] = sq;
    acc_delta[i] = acc_delta[i] * rho + (1.0f - rho) * delta * delta;
    param[i] -= lr * delta;
}

/* torch.optim.SGD (dampening 0, no Nesterov) on element i; buf is unused when momentum is 0. A zero
 * buffer gives torch's first step (buf = grad) exactly. */
static inline HD void op_sgd(float *param, const float *grad, float *buf, size_t i, float lr, float momentum,
                             float weight_decay)
{
    float d = grad[i] + weight_decay * param[i];
    if (momentum != 0.0f) {
        buf[i] = buf[i] * momentum + d;
        d = buf[i];
    }
    param[i] -= lr * d;
}
#endif
