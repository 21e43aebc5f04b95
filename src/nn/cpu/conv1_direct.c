#include "nn/cpu/conv1_direct.h"

#include <immintrin.h>
#include <stdlib.h>

#include "base/errors.h"
#include "base/threads.h"
#include "nn/cpu/cpu_isa.h"
#include "nn/cpu/wino43.h"

/* Built for any x86-64; these functions run only where conv1_direct_usable found AVX-512. */
#define AVX512 __attribute__((target("avx512f,fma")))
#define UNROLL _Pragma("GCC unroll 16")

enum {
    LANES = 16,
    TAPS = 9,
    FG = 4,    /* filters per pass of the forward */
    BG = 2,    /* filters per pass of the backward: 2 x 10 accumulators, 9 inputs */
    SUMS = 10, /* per filter: the nine taps' and the bias's */
};

int conv1_direct_usable(int H, int W, int F, int k, int pad)
{
    return k == 3 && !pad && W - 2 <= 2 * LANES && W >= 3 && H >= 3 && F % FG == 0 && cpu_isa_own() == CPU_ISA_AVX512;
}

/* The lanes of column vector v (0 or 1) that hold output pixels of a row of ow. */
static __mmask16 lanes(int v, int ow)
{
    int n = ow - v * LANES;
    return n >= LANES ? (__mmask16)0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
}

/* The nine inputs under output pixels c0 .. c0+15 of row r: x[r + kh][c0 + kw + lane], zero in unused lanes. */
AVX512 static inline void taps(const float *x, int W, int r, int c0, __mmask16 m, __m512 in[TAPS])
{
    UNROLL
    for (int t = 0; t < TAPS; t++)
        in[t] = _mm512_maskz_loadu_ps(m, x + (size_t)(r + t / 3) * W + c0 + t % 3);
}

AVX512 static void forward_sample(const float *x, const float *w, const float *b, float *y, int N, int n, int H, int W,
                                  int F)
{
    int oh = H - 2, ow = W - 2;
    size_t P = (size_t)oh * ow;
    for (int f0 = 0; f0 < F; f0 += FG)
        for (int r = 0; r < oh; r++)
            for (int v = 0; v * LANES < ow; v++) {
                __mmask16 m = lanes(v, ow);
                __m512 in[TAPS];
                taps(x, W, r, v * LANES, m, in);
                UNROLL
                for (int i = 0; i < FG; i++) {
                    const float *wf = w + (size_t)(f0 + i) * TAPS;
                    __m512 acc = _mm512_set1_ps(b[f0 + i]);
                    UNROLL
                    for (int t = 0; t < TAPS; t++)
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(wf[t]), in[t], acc);
                    _mm512_mask_storeu_ps(y + ((size_t)(f0 + i) * N + n) * P + (size_t)r * ow + v * LANES, m,
                                          _mm512_max_ps(acc, _mm512_setzero_ps()));
                }
            }
}

int conv1_direct_bias_relu(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F, int k,
                           int pad)
{
    if (!conv1_direct_usable(H, W, F, k, pad))
        return 0;
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        forward_sample(x + (size_t)n * H * W, w, b, y, N, n, H, W, F);
    return 1;
}

/* Sample n's products added to the part's sums s [F][SUMS][16 lanes]. */
AVX512 static void backward_sample(const float *x, const float *dy, float *s, int N, int n, int H, int W, int F)
{
    int oh = H - 2, ow = W - 2;
    size_t P = (size_t)oh * ow;
    for (int f0 = 0; f0 < F; f0 += BG) {
        __m512 acc[BG][SUMS];
        UNROLL
        for (int i = 0; i < BG; i++) {
            UNROLL
            for (int j = 0; j < SUMS; j++)
                acc[i][j] = _mm512_loadu_ps(s + ((size_t)(f0 + i) * SUMS + j) * LANES);
        }
        for (int r = 0; r < oh; r++)
            for (int v = 0; v * LANES < ow; v++) {
                __mmask16 m = lanes(v, ow);
                __m512 in[TAPS];
                taps(x, W, r, v * LANES, m, in);
                UNROLL
                for (int i = 0; i < BG; i++) {
                    __m512 g =
                        _mm512_maskz_loadu_ps(m, dy + ((size_t)(f0 + i) * N + n) * P + (size_t)r * ow + v * LANES);
                    UNROLL
                    for (int t = 0; t < TAPS; t++)
                        acc[i][t] = _mm512_fmadd_ps(g, in[t], acc[i][t]);
                    acc[i][TAPS] = _mm512_add_ps(acc[i][TAPS], g);
                }
            }
        UNROLL
        for (int i = 0; i < BG; i++) {
            UNROLL
            for (int j = 0; j < SUMS; j++)
                _mm512_storeu_ps(s + ((size_t)(f0 + i) * SUMS + j) * LANES, acc[i][j]);
        }
    }
}

/* The lanes of a part's sum, added in lane order. */
static float lane_sum(const float *v)
{
    float s = 0;
    for (int l = 0; l < LANES; l++)
        s += v[l];
    return s;
}

void conv1_direct_backward(const float *x, const float *dy, float *dw, float *db, int parts, int N, int H, int W, int F)
{
    size_t part = (size_t)F * SUMS * LANES;
    float *sums = xcalloc((size_t)parts * part, sizeof *sums);
    PARALLEL_FOR
    for (int p = 0; p < parts; p++)
        for (int n = wino43_part_first(N, parts, p); n < wino43_part_first(N, parts, p + 1); n++)
            backward_sample(x + (size_t)n * H * W, dy, sums + p * part, N, n, H, W, F);
    for (int p = 0; p < parts; p++) /* in part order: the same bits for the same number of parts */
        for (int f = 0; f < F; f++) {
            const float *s = sums + p * part + (size_t)f * SUMS * LANES;
            for (int t = 0; t < TAPS; t++)
                dw[f * TAPS + t] += lane_sum(s + t * LANES);
            db[f] += lane_sum(s + TAPS * LANES);
        }
    free(sums);
}

int conv1_direct_blocks_usable(int H, int W, int F, int k, int pad)
{
    return k == 3 && !pad && H >= 3 && W >= 3 && F % LANES == 0 && cpu_isa_own() == CPU_ISA_AVX512;
}

enum { PX = 8 }; /* output pixels at a time: independent chains of multiply-adds */

/* Pixels c0 .. c0+np-1 of row r of one channel block: each output's sum in forward_sample's order. */
AVX512 static inline __attribute__((always_inline)) void blocks_pixels(const float *x, int W, int r, int c0, int np,
                                                                       const __m512 wk[TAPS], __m512 bias, float *hr)
{
    __m512 acc[PX];
    UNROLL
    for (int p = 0; p < PX; p++)
        acc[p] = bias;
    UNROLL
    for (int t = 0; t < TAPS; t++)
        UNROLL
    for (int p = 0; p < PX; p++)
        if (p < np)
            acc[p] = _mm512_fmadd_ps(wk[t], _mm512_set1_ps(x[(size_t)(r + t / 3) * W + c0 + p + t % 3]), acc[p]);
    UNROLL
    for (int p = 0; p < PX; p++)
        if (p < np)
            _mm512_storeu_ps(hr + (size_t)(c0 + p) * LANES, _mm512_max_ps(acc[p], _mm512_setzero_ps()));
}

AVX512 void conv1_direct_blocks_sample(const float *x, const float *w, const float *b, float *h, int H, int W, int F)
{
    int oh = H - 2, ow = W - 2;
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(TAPS));
    for (int cb = 0; cb < F / LANES; cb++) {
        __m512 wk[TAPS], bias = _mm512_loadu_ps(b + cb * LANES);
        UNROLL
        for (int t = 0; t < TAPS; t++)
            wk[t] = _mm512_i32gather_ps(idx, w + (size_t)cb * LANES * TAPS + t, 4);
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

size_t conv1_direct_wgrad_part_size(int F) { return (size_t)F * SUMS; }

/* Each sample's sums start from zero in registers and are added to the part's once: a channel's nine products
 * of a 26 x 26 plane are then summed 676 at a time, not 43,000 (a part of 64 samples) in one float. */
AVX512 void conv1_direct_wgrad_blocks_sample(const float *x, const float *dxb, const float *h, float *part, int H,
                                             int W, int F)
{
    int oh = H - 2, ow = W - 2;
    for (int cb = 0; cb < F / LANES; cb++) {
        __m512 acc[SUMS];
        UNROLL
        for (int j = 0; j < SUMS; j++)
            acc[j] = _mm512_setzero_ps();
        const float *gb = dxb + (size_t)cb * oh * ow * LANES, *hb = h + (size_t)cb * oh * ow * LANES;
        for (int r = 0; r < oh; r++)
            for (int c = 0; c < ow; c++) {
                size_t at = ((size_t)r * ow + c) * LANES;
                /* op_relu_grad: the gradient where the output is above zero */
                __mmask16 on = _mm512_cmp_ps_mask(_mm512_loadu_ps(hb + at), _mm512_setzero_ps(), _CMP_GT_OQ);
                __m512 g = _mm512_maskz_mov_ps(on, _mm512_loadu_ps(gb + at));
                UNROLL
                for (int t = 0; t < TAPS; t++)
                    acc[t] = _mm512_fmadd_ps(g, _mm512_set1_ps(x[(size_t)(r + t / 3) * W + c + t % 3]), acc[t]);
                acc[TAPS] = _mm512_add_ps(acc[TAPS], g);
            }
        float *s = part + (size_t)cb * SUMS * LANES;
        UNROLL
        for (int j = 0; j < SUMS; j++)
            _mm512_storeu_ps(s + j * LANES, _mm512_add_ps(_mm512_loadu_ps(s + j * LANES), acc[j]));
    }
}

void conv1_direct_wgrad_blocks_finish(const float *sums, int parts, float *dw, float *db, int F)
{
    for (int p = 0; p < parts; p++)
        for (int f = 0; f < F; f++) {
            const float *s = sums + p * conv1_direct_wgrad_part_size(F) + (size_t)f / LANES * SUMS * LANES + f % LANES;
            for (int t = 0; t < TAPS; t++)
                dw[f * TAPS + t] += s[t * LANES];
            db[f] += s[TAPS * LANES];
        }
}
