#include "nn/cpu/wino43.h"

#include <immintrin.h>

#include "base/threads.h"

/* Built for any x86-64; these functions run only where wino43_usable found AVX-512. */
#define AVX512 __attribute__((target("avx512f,fma")))
/* The small fixed loops unrolled at -O2 too, so the tiles and accumulators stay in registers (not unrolled,
 * the forward took 2.3 times as long). */
#define UNROLL _Pragma("GCC unroll 16")

enum {
    LANES = 16,
    TILE = 4,       /* output pixels per tile side */
    TIN = TILE + 2, /* input pixels per tile side */
    E = TIN * TIN,  /* transformed elements per tile */
    TB = 6,         /* tiles per product block: 6 x 4 accumulators of 16 filters */
    FG = 4 * LANES, /* filters per product block */
    MAX_CB = 4,     /* channel blocks */
    MAX_F = 128,
};

/* The interpolation points 0, +-3/4, +-3/2 and infinity: on net's conv2 (inputs and weights in [-1, 1]) the
 * largest error is 2.4e-5 of 1 + |y| against 9.3e-5 with the usual 0, +-1, +-2 (oneDNN's Winograd: 1.9e-5).
 * Every constant of B^T and A^T is exact in binary.
 * G, the 6 x 3 weight transform: */
static const float G[TIN][3] = {{64.f / 81, 0, 0},
                                {-128.f / 243, -32.f / 81, -8.f / 27},
                                {-128.f / 243, 32.f / 81, -8.f / 27},
                                {32.f / 243, 16.f / 81, 8.f / 27},
                                {32.f / 243, -16.f / 81, 8.f / 27},
                                {0, 0, 1}};

int wino43_has_cpu(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

int wino43_usable(int C, int F, int H, int W, int k, int pad)
{
    return k == 3 && !pad && C % LANES == 0 && C <= MAX_CB * LANES && F % FG == 0 && F <= MAX_F &&
           (H - 2) % TILE == 0 && (W - 2) % TILE == 0 && H >= TIN && W >= TIN && wino43_has_cpu();
}

size_t wino43_weights_size(int C, int F) { return (size_t)E * C * F; }

/* Sixteen filters f0.. of channel c: U[e][c][f0..] = (G g G^T)[e], g gathered across the filters. */
AVX512 static void weights_block(const float *w, int F, int C, int c, int f0, float *U)
{
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(C * 9));
    __m512 g[9], t[TIN][3];
    UNROLL
    for (int i = 0; i < 9; i++)
        g[i] = _mm512_i32gather_ps(idx, w + ((size_t)f0 * C + c) * 9 + i, 4);
    UNROLL
    for (int i = 0; i < TIN; i++)
        UNROLL
    for (int j = 0; j < 3; j++)
        t[i][j] = _mm512_fmadd_ps(
            _mm512_set1_ps(G[i][2]), g[6 + j],
            _mm512_fmadd_ps(_mm512_set1_ps(G[i][1]), g[3 + j], _mm512_mul_ps(_mm512_set1_ps(G[i][0]), g[j])));
    UNROLL
    for (int i = 0; i < TIN; i++)
        UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 u = _mm512_fmadd_ps(
            t[i][2], _mm512_set1_ps(G[j][2]),
            _mm512_fmadd_ps(t[i][1], _mm512_set1_ps(G[j][1]), _mm512_mul_ps(t[i][0], _mm512_set1_ps(G[j][0]))));
        _mm512_storeu_ps(U + ((size_t)(i * TIN + j) * C + c) * F + f0, u);
    }
}

AVX512 void wino43_weights(const float *w, int F, int C, float *U)
{
    for (int c = 0; c < C; c++)
        for (int f0 = 0; f0 < F; f0 += LANES)
            weights_block(w, F, C, c, f0, U);
}

/* o = B^T d, six vectors of 16 lanes: rows 1-2 and 3-4 are the points +-a, +-b, each pair sharing its even
 * part (d4 - q d2) and its odd part (r d3 - p d1) with opposite signs. */
AVX512 static inline void input_rows(const __m512 d[TIN], __m512 o[TIN])
{
    __m512 c0 = _mm512_set1_ps(81.f / 64), c1 = _mm512_set1_ps(45.f / 16);
    __m512 ea = _mm512_fnmadd_ps(_mm512_set1_ps(9.f / 4), d[2], d[4]);
    __m512 oa = _mm512_fnmadd_ps(_mm512_set1_ps(27.f / 16), d[1], _mm512_mul_ps(_mm512_set1_ps(3.f / 4), d[3]));
    __m512 eb = _mm512_fnmadd_ps(_mm512_set1_ps(9.f / 16), d[2], d[4]);
    __m512 ob = _mm512_fnmadd_ps(_mm512_set1_ps(27.f / 32), d[1], _mm512_mul_ps(_mm512_set1_ps(3.f / 2), d[3]));
    o[0] = _mm512_fmadd_ps(c0, d[0], _mm512_fnmadd_ps(c1, d[2], d[4]));
    o[1] = _mm512_add_ps(ea, oa);
    o[2] = _mm512_sub_ps(ea, oa);
    o[3] = _mm512_add_ps(eb, ob);
    o[4] = _mm512_sub_ps(eb, ob);
    o[5] = _mm512_fmadd_ps(c0, d[1], _mm512_fnmadd_ps(c1, d[3], d[5]));
}

/* o = A^T m: six vectors to four; row i weighs the points' values by their i-th powers. */
AVX512 static inline void output_rows(const __m512 m[TIN], __m512 o[TILE])
{
    __m512 sa = _mm512_add_ps(m[1], m[2]), da = _mm512_sub_ps(m[1], m[2]);
    __m512 sb = _mm512_add_ps(m[3], m[4]), db = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], sa), sb);
    o[1] = _mm512_fmadd_ps(_mm512_set1_ps(3.f / 4), da, _mm512_mul_ps(_mm512_set1_ps(3.f / 2), db));
    o[2] = _mm512_fmadd_ps(_mm512_set1_ps(9.f / 16), sa, _mm512_mul_ps(_mm512_set1_ps(9.f / 4), sb));
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(27.f / 64), da, _mm512_mul_ps(_mm512_set1_ps(27.f / 8), db)),
                         m[5]);
}

/* V[e][cb][t] = (B^T d B)[e] of the input tile at (ty, tx) of channel block cb (16 lanes: 16 channels). */
AVX512 static void input_tile(const float *xb, int W, float *V, int cb_count, int t)
{
    __m512 r[TIN][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 d[TIN], o[TIN];
        UNROLL
        for (int i = 0; i < TIN; i++)
            d[i] = _mm512_loadu_ps(xb + ((size_t)i * W + j) * LANES);
        input_rows(d, o);
        UNROLL
        for (int i = 0; i < TIN; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TIN; i++) {
        __m512 o[TIN];
        input_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TIN; j++)
            _mm512_storeu_ps(V + ((size_t)((i * TIN + j) * cb_count) * TB + t) * LANES, o[j]);
    }
}

/* M[e][t][f] = sum over c of U[e][c][f] V[e][c][t], for TB tiles and F filters (FG at a time). */
AVX512 static void products(const float *U, const float *V, float *M, int C, int F)
{
    for (int e = 0; e < E; e++)
        for (int f0 = 0; f0 < F; f0 += FG) {
            __m512 acc[TB][4];
            UNROLL
            for (int t = 0; t < TB; t++)
                UNROLL
            for (int k = 0; k < 4; k++)
                acc[t][k] = _mm512_setzero_ps();
            const float *u = U + (size_t)e * C * F + f0;
            const float *v = V + (size_t)e * C * TB;
            for (int c = 0; c < C; c++) {
                const float *uc = u + (size_t)c * F, *vc = v + (size_t)(c / LANES) * TB * LANES + c % LANES;
                __m512 u0 = _mm512_loadu_ps(uc), u1 = _mm512_loadu_ps(uc + 16), u2 = _mm512_loadu_ps(uc + 32),
                       u3 = _mm512_loadu_ps(uc + 48);
                UNROLL
                for (int t = 0; t < TB; t++) {
                    __m512 b = _mm512_set1_ps(vc[t * LANES]);
                    acc[t][0] = _mm512_fmadd_ps(u0, b, acc[t][0]);
                    acc[t][1] = _mm512_fmadd_ps(u1, b, acc[t][1]);
                    acc[t][2] = _mm512_fmadd_ps(u2, b, acc[t][2]);
                    acc[t][3] = _mm512_fmadd_ps(u3, b, acc[t][3]);
                }
            }
            UNROLL
            for (int t = 0; t < TB; t++)
                UNROLL
            for (int k = 0; k < 4; k++)
                _mm512_storeu_ps(M + ((size_t)e * TB + t) * F + f0 + 16 * k, acc[t][k]);
        }
}

/* y's 4 x 4 pixels of the tile (16 lanes: 16 filters of block fb) = A^T M A + b. */
AVX512 static void output_tile(const float *M, int F, int fb, int t, __m512 bias, float *yb, int OW)
{
    __m512 r[TILE][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 m[TIN], o[TILE];
        UNROLL
        for (int i = 0; i < TIN; i++)
            m[i] = _mm512_loadu_ps(M + ((size_t)(i * TIN + j) * TB + t) * F + fb * LANES);
        output_rows(m, o);
        UNROLL
        for (int i = 0; i < TILE; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TILE; i++) {
        __m512 o[TILE];
        output_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TILE; j++)
            _mm512_storeu_ps(yb + ((size_t)i * OW + j) * LANES, _mm512_add_ps(o[j], bias));
    }
}

/* One sample: its tiles in blocks of TB (the last block repeats the last tile, writing the same values). */
AVX512 static void forward_sample(const float *x, const float *U, const float *b, float *y, int C, int H, int W, int F)
{
    int OH = H - 2, OW = W - 2, tw = OW / TILE, tiles = OH / TILE * tw, CB = C / LANES, FBk = F / LANES;
    /* Per thread, not on the stack: as locals these made the forward 1.3 times as long (Zen 5). */
    static _Thread_local float V[E * MAX_CB * TB * LANES] __attribute__((aligned(64)));
    static _Thread_local float M[E * TB * MAX_F] __attribute__((aligned(64)));
    for (int t0 = 0; t0 < tiles; t0 += TB) {
        UNROLL
        for (int t = 0; t < TB; t++) {
            int tile = t0 + t < tiles ? t0 + t : tiles - 1, ty = tile / tw, tx = tile % tw;
            for (int cb = 0; cb < CB; cb++)
                input_tile(x + (((size_t)cb * H + TILE * ty) * W + TILE * tx) * LANES, W, V + (size_t)cb * TB * LANES,
                           CB, t);
        }
        products(U, V, M, C, F);
        for (int fb = 0; fb < FBk; fb++) {
            __m512 bias = b ? _mm512_loadu_ps(b + fb * LANES) : _mm512_setzero_ps();
            for (int t = 0; t < TB && t0 + t < tiles; t++) {
                int ty = (t0 + t) / tw, tx = (t0 + t) % tw;
                output_tile(M, F, fb, t, bias, y + (((size_t)fb * OH + TILE * ty) * OW + TILE * tx) * LANES, OW);
            }
        }
    }
}

void wino43_forward(const float *x, const float *U, const float *b, float *y, int N, int C, int H, int W, int F)
{
    size_t xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        forward_sample(x + n * xs, U, b, y + n * ys, C, H, W, F);
}
