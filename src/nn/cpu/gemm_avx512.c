#include "nn/cpu/gemm_avx512.h"

#include <immintrin.h>

#include "nn/cpu/cpu_isa.h"

#define AVX512 __attribute__((target("avx512f,fma")))
#define INLINE __attribute__((always_inline)) inline

/* Tiles: MR rows of C by NV vectors of 16 columns (24 accumulators, one vector of B and one broadcast of A in
 * flight), or MR rows of A by NB rows of B for the transposed B's dot products. */
enum { LANES = 16, MR = 4, NV = 6, NB = 6, KC = 2304 };

int gemm_avx512_has_cpu(void) { return cpu_isa_own() == CPU_ISA_AVX512; }

static INLINE __mmask16 lanes_below(int n) { return n >= LANES ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

_Static_assert(NV == NB, "both tiles' accumulators are MR x NV");

AVX512 static INLINE void zero_tile(__m512 acc[MR][NV])
{
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm512_setzero_ps();
}

/* C[0..mr)[0..16 nv) (+)= sum over p in order of A(i, p) B[p][..]: A(i, p) = a[i ai + p ap]; the last vector
 * holds the columns in 'last'. */
AVX512 static INLINE void bv_tile(int mr, int nv, __mmask16 last, int k, const float *a, long ai, long ap,
                                  const float *b, long ldb, float *c, long ldc, int add)
{
    __m512 acc[MR][NV];
    zero_tile(acc);
    if (add) /* C's tile is read at the end: have it on its way (its rows are far apart) */
        for (int i = 0; i < mr; i++)
            for (int v = 0; v < nv; v++)
                _mm_prefetch((const char *)(c + i * ldc + LANES * v), _MM_HINT_T0);
    for (int p = 0; p < k; p++) {
        __m512 bv[NV];
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++) /* the vectors past nv are never used: zeros keep the compiler sure */
            bv[v] = v < nv ? _mm512_maskz_loadu_ps(v == nv - 1 ? last : 0xffff, b + p * ldb + LANES * v)
                           : _mm512_setzero_ps();
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            if (i < mr) {
                __m512 x = _mm512_set1_ps(a[i * ai + p * ap]);
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++)
                    if (v < nv)
                        acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
            }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++)
            if (i < mr && v < nv) {
                __mmask16 m = v == nv - 1 ? last : 0xffff;
                float *cp = c + i * ldc + LANES * v;
                __m512 s = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, cp), acc[i][v]) : acc[i][v];
                _mm512_mask_storeu_ps(cp, m, s);
            }
}

/* C (+)= op(A) B, B [k][n]: panels of 16 NV columns (B's panel stays in cache), MR rows at a time. */
AVX512 static void gemm_bv(int m, int n, int k, const float *a, long ai, long ap, const float *b, long ldb, float *c,
                           long ldc, int add)
{
    for (int j = 0; j < n; j += LANES * NV) {
        int cols = n - j < LANES * NV ? n - j : LANES * NV, nv = (cols + LANES - 1) / LANES;
        __mmask16 last = lanes_below(cols - LANES * (nv - 1));
        for (int i = 0; i < m; i += MR) {
            const float *ap_ = a + i * ai;
            float *cp = c + i * ldc + j;
            if (m - i >= MR && nv == NV && last == 0xffff)
                bv_tile(MR, NV, 0xffff, k, ap_, ai, ap, b + j, ldb, cp, ldc, add);
            else
                bv_tile(m - i < MR ? m - i : MR, nv, last, k, ap_, ai, ap, b + j, ldb, cp, ldc, add);
        }
    }
}

/* C[0..mr)[0..nb) (+)= the dot products of A's rows with B's over [0, kc): sixteen lanes of partial sums
 * each, then added across the lanes. */
AVX512 static INLINE void dot_tile(int mr, int nb, int kc, const float *a, long lda, const float *b, long ldb, float *c,
                                   long ldc, int add)
{
    __m512 acc[MR][NB];
    zero_tile(acc);
    for (int p = 0; p < kc; p += LANES) {
        __mmask16 m = lanes_below(kc - p);
        __m512 av[MR];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
            av[i] = i < mr ? _mm512_maskz_loadu_ps(m, a + i * lda + p) : _mm512_setzero_ps();
#pragma GCC unroll 6
        for (int j = 0; j < NB; j++)
            if (j < nb) {
                __m512 bv = _mm512_maskz_loadu_ps(m, b + j * ldb + p);
#pragma GCC unroll 4
                for (int i = 0; i < MR; i++)
                    if (i < mr)
                        acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
            }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 6
        for (int j = 0; j < NB; j++)
            if (i < mr && j < nb) {
                float s = _mm512_reduce_add_ps(acc[i][j]);
                c[i * ldc + j] = add ? c[i * ldc + j] + s : s;
            }
}

/* C (+)= A B^T: blocks of KC terms, NB rows of B by MR of A. B's NB rows of a block are copied together first:
 * rows a multiple of 4 KiB apart (fc1's, 36 KiB) fall in the same few L1 sets, and ten of them at once thrash. */
AVX512 static void gemm_dot(int m, int n, int k, const float *a, long lda, const float *b, long ldb, float *c, long ldc,
                            int add)
{
    static _Thread_local float panel[NB * KC] __attribute__((aligned(64)));
    for (int p = 0; p < k; p += KC) {
        int kc = k - p < KC ? k - p : KC, to_c = add || p > 0;
        for (int j = 0; j < n; j += NB) {
            int nb = n - j < NB ? n - j : NB;
            for (int r = 0; r < nb; r++)
                for (int q = 0; q < kc; q += LANES)
                    _mm512_storeu_ps(panel + r * KC + q,
                                     _mm512_maskz_loadu_ps(lanes_below(kc - q), b + (j + r) * ldb + p + q));
            for (int i = 0; i < m; i += MR) {
                const float *ap_ = a + i * lda + p;
                float *cp = c + i * ldc + j;
                if (m - i >= MR && nb == NB)
                    dot_tile(MR, NB, kc, ap_, lda, panel, KC, cp, ldc, to_c);
                else
                    dot_tile(m - i < MR ? m - i : MR, nb, kc, ap_, lda, panel, KC, cp, ldc, to_c);
            }
        }
    }
}

int gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                int ldb, float beta, float *c, int ldc)
{
    if (!gemm_avx512_has_cpu() || alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || (trans_a && trans_b) || k < 1)
        return 0;
    int add = beta != 0.0f;
    if (trans_b)
        gemm_dot(m, n, k, a, lda, b, ldb, c, ldc, add);
    else
        gemm_bv(m, n, k, a, trans_a ? 1 : lda, trans_a ? lda : 1, b, ldb, c, ldc, add);
    return 1;
}
