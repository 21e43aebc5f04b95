/* What one GPU thread computes for flat index i: the index decomposition of each elementwise layer
 * kernel, calling the math of ops.h. cuda/layers.cu runs these in grid-stride loops; tests/unit/check_kernels.c
 * runs them in plain loops on the CPU and compares with the CPU layers (src/nn_cpu.c), so the GPU's
 * index math is tested on machines without a GPU. Sizes and layouts as in nn_cpu.h. */
#ifndef MNIST_KERNELS_H
#define MNIST_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "hd.h"
#include "mnist.h"
#include "ops.h"

/* i < n * MNIST_PIXELS: pixel p of batch sample i / MNIST_PIXELS, which is sample idx[that] (idx NULL: itself). */
static inline HD void kern_gather(size_t i, const uint8_t *images, const uint8_t *labels, const uint64_t *idx,
                                  float *x, uint8_t *y)
{
    size_t n = i / MNIST_PIXELS, p = i % MNIST_PIXELS;
    uint64_t s = idx ? idx[n] : (uint64_t)n;
    x[i] = op_normalize(images[s * MNIST_PIXELS + p]);
    if (y && p == 0)
        y[n] = labels[s];
}

/* i < C*k*k * ns*P: one entry of col [C*k*k][ns*P] (P = OH*OW, or OH*W when wide); the channel comes
 * from i, so C is only the caller's bound. */
static inline HD void kern_im2col(size_t i, const float *x, float *col, int N, int H, int W, int k, int pad, int n0,
                                  int ns, int wide)
{
    int OH = H + 2 * pad - k + 1, OW = wide ? W : W + 2 * pad - k + 1;
    size_t P = (size_t)OH * OW, ld = (size_t)ns * P, r = i / ld, q = i % ld;
    int c = (int)(r / (size_t)(k * k)), t = (int)(r % (size_t)(k * k)), kh = t / k, kw = t % k;
    size_t n = q / P, j = q % P;
    const float *plane = x + ((size_t)c * N + (size_t)n0 + n) * H * W;
    if (wide)
        col[i] = (int)j < op_wide_span(OH, W, k) ? plane[j + (size_t)op_wide_offset(kh, kw, W)] : 0.0f;
    else
        col[i] = op_im2col(plane, H, W, pad, kh, kw, (int)(j / (size_t)OW), (int)(j % (size_t)OW));
}

/* i < C * ns*H*W: input gradient (c, n0 + n, ih, iw) gathered from dcol, taps in op_col2im's order. */
static inline HD void kern_col2im(size_t i, const float *dcol, float *dx, int N, int H, int W, int k, int pad,
                                  int n0, int ns, int wide)
{
    int OH = H + 2 * pad - k + 1, OW = wide ? W : W + 2 * pad - k + 1;
    size_t P = (size_t)OH * OW, ld = (size_t)ns * P, HW = (size_t)H * W;
    size_t c = i / ((size_t)ns * HW), q = i % ((size_t)ns * HW), n = q / HW, j = q % HW;
    const float *src = dcol + c * (size_t)(k * k) * ld + n * P;
    float s = 0.0f;
    if (wide) {
        int span = op_wide_span(OH, W, k);
        for (int kh = 0; kh < k; kh++)
            for (int kw = 0; kw < k; kw++) {
                long o = (long)j - op_wide_offset(kh, kw, W);
                if (o >= 0 && o < span)
                    s += src[(size_t)(kh * k + kw) * ld + (size_t)o];
            }
    } else {
        s = op_col2im(src, ld, k, pad, OH, OW, (int)(j / (size_t)W), (int)(j % (size_t)W));
    }
    dx[(c * N + (size_t)n0 + n) * HW + j] = s;
}

/* i < rows * cols: y[r][j] = b[r] (by_row) or b[j]. */
static inline HD void kern_fill(size_t i, float *y, const float *b, size_t cols, size_t ld, int by_row)
{
    size_t r = i / cols, j = i % cols;
    y[r * ld + j] = by_row ? b[r] : b[j];
}

/* i < planes * (H/2) * (W/2): one pooled output. */
static inline HD void kern_maxpool2(size_t i, const float *x, float *y, int32_t *arg, int H, int W, int ld)
{
    size_t OP = (size_t)(H / 2) * (W / 2), p = i / OP, o = i % OP;
    y[i] = op_maxpool2(x + p * H * ld, ld, (int)(o / (size_t)(W / 2)), (int)(o % (size_t)(W / 2)), &arg[i]);
}

/* i < planes * H * ld: one input gradient; 0 outside the argmaxes and outside every window. */
static inline HD void kern_maxpool2_grad(size_t i, const float *dy, const int32_t *arg, float *dx, int H, int W,
                                         int ld)
{
    int OH = H / 2, OW = W / 2;
    size_t p = i / ((size_t)H * ld), q = i % ((size_t)H * ld);
    int ih = (int)(q / (size_t)ld), iw = (int)(q % (size_t)ld);
    float g = 0.0f;
    if (ih < 2 * OH && iw < 2 * OW) {
        size_t o = p * OH * OW + (size_t)(ih / 2) * OW + (size_t)(iw / 2);
        g = arg[o] == (int32_t)q ? dy[o] : 0.0f;
    }
    dx[i] = g;
}

/* i < N * D: element i % D of sample i / D. */
static inline HD void kern_dropout(size_t i, float *x, float *mask, int D, const uint64_t *ids, uint64_t key, int layer,
                                   float p)
{
    size_t n = i / (size_t)D;
    mask[i] = op_dropout_mask(op_dropout_key(key, ids[n], layer), i % (size_t)D, op_dropout_threshold(p),
                              1.0f / (1.0f - p));
    x[i] *= mask[i];
}

/* For i < C*N*HW, an index of the per-sample layout [N][C][HW]: the same element's CNHW index (flatten:
 * y[i] = x[kern_cnhw_index(i)], unflatten the reverse). */
static inline HD size_t kern_cnhw_index(size_t i, int C, int N, int HW)
{
    size_t per = (size_t)C * HW, n = i / per, c = (i % per) / (size_t)HW;
    return (c * (size_t)N + n) * HW + i % (size_t)HW;
}
#endif
