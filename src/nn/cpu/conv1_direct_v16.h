/* conv1_direct.h's kernels written once over 16-float vectors. conv1_direct_avx512.c and conv1_direct_avx2.c
 * each include a v16 header, define CONV1_DIRECT_VARIANT and include this, so both ISAs give the same bits
 * (check_wino43_isa compares them). Only how many filters or pixels go at once follows the registers. */
#include <stddef.h>

#include "nn/cpu/conv1_direct.h"

#define UNROLL _Pragma("GCC unroll 16")

enum {
    LANES = 16,
    TAPS = 9,
    FG = 4,             /* filters per pass of the forward */
    BG = V16_REGS / 16, /* filters per pass of the backward: 2 (or 1) x 10 accumulators, 9 inputs */
    SUMS = 10,          /* per filter: the nine taps' and the bias's */
    PX = V16_REGS / 4,  /* output pixels at a time: independent chains of multiply-adds, 8 or 4 vectors */
};

/* The lanes of column vector v that hold output pixels of a row of ow. */
static inline int row_lanes(int v, int ow) { return ow - v * LANES < LANES ? ow - v * LANES : LANES; }

/* The nine inputs under output pixels c0 .. c0+15 of row r: x[r + kh][c0 + kw + lane], zero past n lanes. */
V16_TARGET static inline void taps(const float *x, int W, int r, int c0, int n, v16 in[TAPS])
{
    UNROLL
    for (int t = 0; t < TAPS; t++)
        in[t] = v16_load_first(x + (size_t)(r + t / 3) * W + c0 + t % 3, n);
}

/* Sample n's relu(conv + b) into y [F][N][H-2][W-2]: 16 pixels of a row per vector, FG filters at a time. */
V16_TARGET static void forward_sample(const float *x, const float *w, const float *b, float *y, int N, int n, int H,
                                      int W, int F)
{
    int oh = H - 2, ow = W - 2;
    size_t P = (size_t)oh * ow;
    for (int f0 = 0; f0 < F; f0 += FG)
        for (int r = 0; r < oh; r++)
            for (int v = 0; v * LANES < ow; v++) {
                int nl = row_lanes(v, ow);
                v16 in[TAPS];
                taps(x, W, r, v * LANES, nl, in);
                UNROLL
                for (int i = 0; i < FG; i++) {
                    const float *wf = w + (size_t)(f0 + i) * TAPS;
                    v16 acc = v16_set1(b[f0 + i]);
                    UNROLL
                    for (int t = 0; t < TAPS; t++)
                        acc = v16_fmadd(v16_set1(wf[t]), in[t], acc);
                    v16_store_first(y + ((size_t)(f0 + i) * N + n) * P + (size_t)r * ow + v * LANES, nl, v16_relu(acc));
                }
            }
}

/* Sample n's products added to the part's sums s [F][SUMS][16 lanes]. */
V16_TARGET static void backward_sample(const float *x, const float *dy, float *s, int N, int n, int H, int W, int F)
{
    int oh = H - 2, ow = W - 2;
    size_t P = (size_t)oh * ow;
    for (int f0 = 0; f0 < F; f0 += BG) {
        v16 acc[BG][SUMS];
        UNROLL
        for (int i = 0; i < BG; i++) {
            UNROLL
            for (int j = 0; j < SUMS; j++)
                acc[i][j] = v16_load(s + ((size_t)(f0 + i) * SUMS + j) * LANES);
        }
        for (int r = 0; r < oh; r++)
            for (int v = 0; v * LANES < ow; v++) {
                int nl = row_lanes(v, ow);
                v16 in[TAPS];
                taps(x, W, r, v * LANES, nl, in);
                UNROLL
                for (int i = 0; i < BG; i++) {
                    v16 g = v16_load_first(dy + ((size_t)(f0 + i) * N + n) * P + (size_t)r * ow + v * LANES, nl);
                    UNROLL
                    for (int t = 0; t < TAPS; t++)
                        acc[i][t] = v16_fmadd(g, in[t], acc[i][t]);
                    acc[i][TAPS] = v16_add(acc[i][TAPS], g);
                }
            }
        UNROLL
        for (int i = 0; i < BG; i++) {
            UNROLL
            for (int j = 0; j < SUMS; j++)
                v16_store(s + ((size_t)(f0 + i) * SUMS + j) * LANES, acc[i][j]);
        }
    }
}

/* Pixels c0 .. c0+np-1 of row r of one channel block: each output's sum in conv1_direct_bias_relu's order. */
V16_TARGET static inline __attribute__((always_inline)) void blocks_pixels(const float *x, int W, int r, int c0, int np,
                                                                           const v16 wk[TAPS], v16 bias, float *hr)
{
    v16 acc[PX];
    UNROLL
    for (int p = 0; p < PX; p++)
        acc[p] = bias;
    UNROLL
    for (int t = 0; t < TAPS; t++)
        UNROLL
    for (int p = 0; p < PX; p++)
        if (p < np)
            acc[p] = v16_fmadd(wk[t], v16_set1(x[(size_t)(r + t / 3) * W + c0 + p + t % 3]), acc[p]);
    UNROLL
    for (int p = 0; p < PX; p++)
        if (p < np)
            v16_store(hr + (size_t)(c0 + p) * LANES, v16_relu(acc[p]));
}

V16_TARGET static void blocks_sample(const float *x, const float *w, const float *b, float *h, int H, int W, int F)
{
    int oh = H - 2, ow = W - 2;
    for (int cb = 0; cb < F / LANES; cb++) {
        v16 wk[TAPS], bias = v16_load(b + cb * LANES);
        UNROLL
        for (int t = 0; t < TAPS; t++)
            wk[t] = v16_gather(w + (size_t)cb * LANES * TAPS + t, TAPS);
        for (int r = 0; r < oh; r++) {
            float *hr = h + ((size_t)cb * oh + r) * ow * LANES;
            int c0 = 0;
            for (; c0 + PX <= ow; c0 += PX)
                blocks_pixels(x, W, r, c0, PX, wk, bias, hr);
            for (; c0 < ow; c0++)
                blocks_pixels(x, W, r, c0, 1, wk, bias, hr);
        }
    }
}

/* Each sample's sums start from zero in registers and are added to the part's once. So a channel's nine
 * products of a 26 x 26 plane are summed 676 at a time, not 43,000 (a part of 64 samples) in one float. */
V16_TARGET static void wgrad_blocks_sample(const float *x, const float *dxb, const float *h, float *part, int H, int W,
                                           int F)
{
    int oh = H - 2, ow = W - 2;
    for (int cb = 0; cb < F / LANES; cb++) {
        v16 acc[SUMS];
        UNROLL
        for (int j = 0; j < SUMS; j++)
            acc[j] = v16_zero();
        const float *gb = dxb + (size_t)cb * oh * ow * LANES, *hb = h + (size_t)cb * oh * ow * LANES;
        for (int r = 0; r < oh; r++)
            for (int c = 0; c < ow; c++) {
                size_t at = ((size_t)r * ow + c) * LANES;
                v16 g = v16_where_positive(v16_load(hb + at), v16_load(gb + at)); /* op_relu_grad */
                UNROLL
                for (int t = 0; t < TAPS; t++)
                    acc[t] = v16_fmadd(g, v16_set1(x[(size_t)(r + t / 3) * W + c + t % 3]), acc[t]);
                acc[TAPS] = v16_add(acc[TAPS], g);
            }
        float *s = part + (size_t)cb * SUMS * LANES;
        UNROLL
        for (int j = 0; j < SUMS; j++)
            v16_store(s + j * LANES, v16_add(v16_load(s + j * LANES), acc[j]));
    }
}

const conv1_direct_kernels CONV1_DIRECT_VARIANT = {.forward_sample = forward_sample,
                                                   .backward_sample = backward_sample,
                                                   .blocks_sample = blocks_sample,
                                                   .wgrad_blocks_sample = wgrad_blocks_sample};
