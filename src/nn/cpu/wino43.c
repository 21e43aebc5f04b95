#include "nn/cpu/wino43.h"

#include <immintrin.h>
#include <string.h>

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
    TB = 6,         /* tiles per product block: 6 x 4 accumulators of 16 filters ... */
    TB7 = 7,        /* ... or 7 x 2 (at most 2 vectors of outputs), where the tiles come in sevens */
    MAX_CB = 8,     /* input channel blocks */
    MAX_F = 128,    /* output channels */
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
    return k == 3 && !pad && C % LANES == 0 && C <= MAX_CB * LANES && F % LANES == 0 && F <= MAX_F &&
           (H - 2) % TILE == 0 && (W - 2) % TILE == 0 && H >= TIN && W >= TIN && wino43_has_cpu();
}

int wino43_backward_usable(int C, int F, int H, int W, int k, int pad)
{
    return k == 3 && !pad && C % LANES == 0 && C <= MAX_F && F % LANES == 0 && F <= MAX_CB * LANES && H >= 3 &&
           W >= 3 && wino43_has_cpu();
}

size_t wino43_weights_size(int C, int F) { return (size_t)E * C * F; }

/* U[e][i][o0..o0+15] = (G g G^T)[e] for input channel i and 16 output channels from o0, g gathered across them:
 * output o's taps for input i at w + o * out_stride + i * in_stride, turned by 180 degrees if flip. */
AVX512 static void weights_block(const float *w, int out_stride, int in_stride, int flip, int cin, int cout, int i,
                                 int o0, float *U)
{
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(out_stride));
    __m512 g[9], t[TIN][3];
    UNROLL
    for (int k = 0; k < 9; k++)
        g[k] = _mm512_i32gather_ps(idx, w + (size_t)o0 * out_stride + (size_t)i * in_stride + (flip ? 8 - k : k), 4);
    UNROLL
    for (int a = 0; a < TIN; a++)
        UNROLL
    for (int j = 0; j < 3; j++)
        t[a][j] = _mm512_fmadd_ps(
            _mm512_set1_ps(G[a][2]), g[6 + j],
            _mm512_fmadd_ps(_mm512_set1_ps(G[a][1]), g[3 + j], _mm512_mul_ps(_mm512_set1_ps(G[a][0]), g[j])));
    UNROLL
    for (int a = 0; a < TIN; a++)
        UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 u = _mm512_fmadd_ps(
            t[a][2], _mm512_set1_ps(G[j][2]),
            _mm512_fmadd_ps(t[a][1], _mm512_set1_ps(G[j][1]), _mm512_mul_ps(t[a][0], _mm512_set1_ps(G[j][0]))));
        _mm512_storeu_ps(U + ((size_t)(a * TIN + j) * cin + i) * cout + o0, u);
    }
}

AVX512 void wino43_weights(const float *w, int F, int C, float *U)
{
    for (int c = 0; c < C; c++)
        for (int f0 = 0; f0 < F; f0 += LANES)
            weights_block(w, C * 9, 9, 0, C, F, c, f0, U);
}

/* The input gradient's: input channels the filters, output channels the channels, each kernel turned. */
AVX512 void wino43_weights_backward(const float *w, int F, int C, float *U)
{
    for (int f = 0; f < F; f++)
        for (int c0 = 0; c0 < C; c0 += LANES)
            weights_block(w, 9, C * 9, 1, F, C, f, c0, U);
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

/* A convolution without bias over 16-channel blocks: cin channels of ih x iw in, read with pad zeros around,
 * cout channels of oh x ow out (tiles at the bottom and right edges cut short). */
typedef struct {
    int cin, cout, ih, iw, pad, oh, ow;
} geometry;

/* V[e * stride] = (B^T d B)[e] of the 6 x 6 input tile whose corner is row r0, column c0 of channel block xb
 * (ih x iw pixels of 16 lanes: 16 channels); outside the plane d is 0. */
AVX512 static void input_tile(const float *xb, int ih, int iw, int r0, int c0, float *V, size_t stride)
{
    int inside = r0 >= 0 && c0 >= 0 && r0 + TIN <= ih && c0 + TIN <= iw;
    __m512 r[TIN][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 d[TIN], o[TIN];
        UNROLL
        for (int i = 0; i < TIN; i++)
            d[i] = inside || ((unsigned)(r0 + i) < (unsigned)ih && (unsigned)(c0 + j) < (unsigned)iw)
                       ? _mm512_loadu_ps(xb + ((ptrdiff_t)(r0 + i) * iw + c0 + j) * LANES)
                       : _mm512_setzero_ps();
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
            _mm512_storeu_ps(V + (i * TIN + j) * stride, o[j]);
    }
}

/* M[e][t][o] = sum over i of U[e][i][o] V[e][i][t], for tb tiles and cout outputs, nv vectors of them at a
 * time (nv and tb constants where inlined: the accumulators stay in registers). */
AVX512 static inline __attribute__((always_inline)) void products_nv(const float *U, const float *V, float *M, int cin,
                                                                     int cout, int nv, int tb)
{
    for (int e = 0; e < E; e++)
        for (int o0 = 0; o0 < cout; o0 += nv * LANES) {
            __m512 acc[TB7][4];
            UNROLL
            for (int t = 0; t < tb; t++)
                UNROLL
            for (int k = 0; k < nv; k++)
                acc[t][k] = _mm512_setzero_ps();
            const float *u = U + (size_t)e * cin * cout + o0;
            const float *v = V + (size_t)e * cin * tb;
            for (int c = 0; c < cin; c++) {
                const float *uc = u + (size_t)c * cout, *vc = v + (size_t)(c / LANES) * tb * LANES + c % LANES;
                __m512 uk[4];
                UNROLL
                for (int k = 0; k < nv; k++)
                    uk[k] = _mm512_loadu_ps(uc + 16 * k);
                UNROLL
                for (int t = 0; t < tb; t++) {
                    __m512 b = _mm512_set1_ps(vc[t * LANES]);
                    UNROLL
                    for (int k = 0; k < nv; k++)
                        acc[t][k] = _mm512_fmadd_ps(uk[k], b, acc[t][k]);
                }
            }
            UNROLL
            for (int t = 0; t < tb; t++)
                UNROLL
            for (int k = 0; k < nv; k++)
                _mm512_storeu_ps(M + ((size_t)e * tb + t) * cout + o0 + 16 * k, acc[t][k]);
        }
}

AVX512 static void products(const float *U, const float *V, float *M, int cin, int cout, int tb)
{
    if (tb == TB7 && cout % (2 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 2, TB7);
    else if (tb == TB7)
        products_nv(U, V, M, cin, cout, 1, TB7);
    else if (cout % (4 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 4, TB);
    else if (cout % (2 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 2, TB);
    else
        products_nv(U, V, M, cin, cout, 1, TB);
}

/* Tiles per block: seven where they come in sevens and the outputs fit 7 x 2 accumulators (the input
 * gradient's 7 x 7 tiles: 49 in 9 blocks of six would compute 54), else six. */
static int block_tiles(int tiles, int cout) { return tiles % TB7 == 0 && cout % (4 * LANES) != 0 ? TB7 : TB; }

/* The tile's nr x nc pixels of output block ob at yb (16 lanes: 16 channels) = A^T M A + bias. */
AVX512 static void output_tile(const float *M, int cout, int tb, int ob, int t, __m512 bias, float *yb, int ow, int nr,
                               int nc)
{
    __m512 r[TILE][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        __m512 m[TIN], o[TILE];
        UNROLL
        for (int i = 0; i < TIN; i++)
            m[i] = _mm512_loadu_ps(M + ((size_t)(i * TIN + j) * tb + t) * cout + ob * LANES);
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
            if (i < nr && j < nc)
                _mm512_storeu_ps(yb + ((size_t)i * ow + j) * LANES, _mm512_add_ps(o[j], bias));
    }
}

/* One sample: its tiles in blocks of tb (the last block repeats the last tile and writes it once). */
AVX512 static void conv_sample(const float *x, const float *U, const float *b, float *y, const geometry *g)
{
    int tw = (g->ow + TILE - 1) / TILE, tiles = (g->oh + TILE - 1) / TILE * tw, CB = g->cin / LANES,
        tb = block_tiles(tiles, g->cout);
    /* Per thread, not on the stack: as locals these made the forward 1.3 times as long (Zen 5). */
    static _Thread_local float V[E * MAX_CB * TB7 * LANES] __attribute__((aligned(64)));
    static _Thread_local float M[E * TB7 * MAX_F] __attribute__((aligned(64)));
    for (int t0 = 0; t0 < tiles; t0 += tb) {
        UNROLL
        for (int t = 0; t < tb; t++) {
            int tile = t0 + t < tiles ? t0 + t : tiles - 1, ty = tile / tw, tx = tile % tw;
            for (int cb = 0; cb < CB; cb++)
                input_tile(x + (size_t)cb * g->ih * g->iw * LANES, g->ih, g->iw, TILE * ty - g->pad, TILE * tx - g->pad,
                           V + ((size_t)cb * tb + t) * LANES, (size_t)CB * tb * LANES);
        }
        products(U, V, M, g->cin, g->cout, tb);
        for (int ob = 0; ob < g->cout / LANES; ob++) {
            __m512 bias = b ? _mm512_loadu_ps(b + ob * LANES) : _mm512_setzero_ps();
            for (int t = 0; t < tb && t0 + t < tiles; t++) {
                int ty = (t0 + t) / tw, tx = (t0 + t) % tw, nr = g->oh - TILE * ty, nc = g->ow - TILE * tx;
                output_tile(M, g->cout, tb, ob, t, bias,
                            y + (((size_t)ob * g->oh + TILE * ty) * g->ow + TILE * tx) * LANES, g->ow,
                            nr < TILE ? nr : TILE, nc < TILE ? nc : TILE);
            }
        }
    }
}

void wino43_forward_sample(const float *x, const float *U, const float *b, float *y, int C, int H, int W, int F)
{
    geometry g = {C, F, H, W, 0, H - 2, W - 2};
    conv_sample(x, U, b, y, &g);
}

/* The input gradient is the correlation of dy, padded by 2, with the turned kernels. */
void wino43_backward_data_sample(const float *dy, const float *U, float *dx, int C, int H, int W, int F)
{
    geometry g = {F, C, H - 2, W - 2, 2, H, W};
    conv_sample(dy, U, NULL, dx, &g);
}

void wino43_forward(const float *x, const float *U, const float *b, float *y, int N, int C, int H, int W, int F)
{
    size_t xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        wino43_forward_sample(x + n * xs, U, b, y + n * ys, C, H, W, F);
}

void wino43_backward_data(const float *dy, const float *U, float *dx, int N, int C, int H, int W, int F)
{
    size_t xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        wino43_backward_data_sample(dy + n * ys, U, dx + n * xs, C, H, W, F);
}

/* The weight gradient: per tile, dw's 3 x 3 correlation of the 6 x 6 input tile with the 4 x 4 output
 * gradient is Winograd F(3x3, 4x4) over the same points: A3^T [(B^T x B) (*) (G4 dy G4^T)] A3, so the sums over
 * tiles and samples run in the transformed space (36 products [C x tiles] x [tiles x F]) and only their total
 * is transformed back. Tiles go by blocks of WT, their transforms in buffers that stay in L2 (oneDNN 2.6's
 * Winograd weight gradient writes the whole transformed input and gradient to memory). */
enum { WT = 12 }; /* a third of a 24 x 24 plane's tiles */
/* Floats from one point's block of V or D to the next: a line more than the block, so that the 36 stores of a
 * tile's transform do not fall in few L1 sets (with WT = 12 the blocks are 1.5 and 3 KB). */
static inline size_t point_stride(int channels) { return (size_t)WT * channels + LANES; }

/* o = G4 d: four vectors to six; rows 1-2 and 3-4 share their even and odd parts with opposite signs. */
AVX512 static inline void gradient_rows(const __m512 d[TILE], __m512 o[TIN])
{
    __m512 ea = _mm512_fmadd_ps(_mm512_set1_ps(-128.f / 243), d[0], _mm512_mul_ps(_mm512_set1_ps(-8.f / 27), d[2]));
    __m512 oa = _mm512_fmadd_ps(_mm512_set1_ps(-32.f / 81), d[1], _mm512_mul_ps(_mm512_set1_ps(-2.f / 9), d[3]));
    __m512 eb = _mm512_fmadd_ps(_mm512_set1_ps(32.f / 243), d[0], _mm512_mul_ps(_mm512_set1_ps(8.f / 27), d[2]));
    __m512 ob = _mm512_fmadd_ps(_mm512_set1_ps(16.f / 81), d[1], _mm512_mul_ps(_mm512_set1_ps(4.f / 9), d[3]));
    o[0] = _mm512_mul_ps(_mm512_set1_ps(64.f / 81), d[0]);
    o[1] = _mm512_add_ps(ea, oa);
    o[2] = _mm512_sub_ps(ea, oa);
    o[3] = _mm512_add_ps(eb, ob);
    o[4] = _mm512_sub_ps(eb, ob);
    o[5] = d[3];
}

/* D[e][t][16 lanes] = (G4 dy G4^T)[e] of the 4 x 4 gradient tile at dyb (rows of ow pixels); row stride of
 * D is ld floats. */
AVX512 static void gradient_tile(const float *dyb, int ow, float *D, int ld, int t)
{
    __m512 r[TIN][TILE];
    UNROLL
    for (int j = 0; j < TILE; j++) {
        __m512 d[TILE], o[TIN];
        UNROLL
        for (int i = 0; i < TILE; i++)
            d[i] = _mm512_loadu_ps(dyb + ((size_t)i * ow + j) * LANES);
        gradient_rows(d, o);
        UNROLL
        for (int i = 0; i < TIN; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TIN; i++) {
        __m512 o[TIN];
        gradient_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TIN; j++)
            _mm512_storeu_ps(D + (i * TIN + j) * point_stride(ld) + (size_t)t * ld, o[j]);
    }
}

/* Mw[e][c][f] += sum over t < nt of V[e][t][c] D[e][t][f]: four channels by nv vectors of filters at a time. */
AVX512 static inline __attribute__((always_inline)) void wgrad_products_nv(const float *V, const float *D, float *Mw,
                                                                           int C, int F, int nt, int nv)
{
    for (int e = 0; e < E; e++) {
        const float *v = V + e * point_stride(C), *d = D + e * point_stride(F);
        float *m = Mw + (size_t)e * C * F;
        for (int c0 = 0; c0 < C; c0 += 4)
            for (int f0 = 0; f0 < F; f0 += nv * LANES) {
                __m512 acc[4][4];
                UNROLL
                for (int i = 0; i < 4; i++) {
                    UNROLL
                    for (int k = 0; k < nv; k++)
                        acc[i][k] = _mm512_loadu_ps(m + (size_t)(c0 + i) * F + f0 + LANES * k);
                }
                for (int t = 0; t < nt; t++) {
                    __m512 dk[4];
                    UNROLL
                    for (int k = 0; k < nv; k++)
                        dk[k] = _mm512_loadu_ps(d + (size_t)t * F + f0 + LANES * k);
                    UNROLL
                    for (int i = 0; i < 4; i++) {
                        __m512 b = _mm512_set1_ps(v[(size_t)t * C + c0 + i]);
                        UNROLL
                        for (int k = 0; k < nv; k++)
                            acc[i][k] = _mm512_fmadd_ps(dk[k], b, acc[i][k]);
                    }
                }
                UNROLL
                for (int i = 0; i < 4; i++) {
                    UNROLL
                    for (int k = 0; k < nv; k++)
                        _mm512_storeu_ps(m + (size_t)(c0 + i) * F + f0 + LANES * k, acc[i][k]);
                }
            }
    }
}

AVX512 static void wgrad_products(const float *V, const float *D, float *Mw, int C, int F, int nt)
{
    if (F % (4 * LANES) == 0)
        wgrad_products_nv(V, D, Mw, C, F, nt, 4);
    else if (F % (2 * LANES) == 0)
        wgrad_products_nv(V, D, Mw, C, F, nt, 2);
    else
        wgrad_products_nv(V, D, Mw, C, F, nt, 1);
}

size_t wino43_wgrad_part_size(int C, int F) { return (size_t)E * (C * F + point_stride(C) + point_stride(F)) + F; }

/* A part: Mw [36][C][F], then a block's V and D, then db [F]. */
void wino43_wgrad_start(float *part, int C, int F) { memset(part, 0, wino43_wgrad_part_size(C, F) * sizeof(float)); }

/* One sample's sums into the part, its tiles in blocks of WT. */
AVX512 void wino43_wgrad_sample(const float *x, const float *dy, float *part, int C, int H, int W, int F)
{
    int oh = H - 2, ow = W - 2, tw = ow / TILE, tiles = oh / TILE * tw;
    float *Mw = part, *V = Mw + (size_t)E * C * F, *D = V + E * point_stride(C), *db = D + E * point_stride(F);
    for (int t0 = 0; t0 < tiles; t0 += WT) {
        int nt = tiles - t0 < WT ? tiles - t0 : WT;
        for (int t = 0; t < nt; t++) {
            int ty = (t0 + t) / tw, tx = (t0 + t) % tw;
            for (int cb = 0; cb < C / LANES; cb++)
                input_tile(x + (size_t)cb * H * W * LANES, H, W, TILE * ty, TILE * tx, V + (size_t)t * C + cb * LANES,
                           point_stride(C)); /* V [e][t][c] for the products' broadcasts */
            for (int fb = 0; fb < F / LANES; fb++)
                gradient_tile(dy + (((size_t)fb * oh + TILE * ty) * ow + TILE * tx) * LANES, ow, D + fb * LANES, F, t);
        }
        wgrad_products(V, D, Mw, C, F, nt);
    }
    for (int fb = 0; fb < F / LANES; fb++) {
        const float *g = dy + (size_t)fb * oh * ow * LANES;
        __m512 sum = _mm512_loadu_ps(db + fb * LANES);
        for (int p = 0; p < oh * ow; p++)
            sum = _mm512_add_ps(sum, _mm512_loadu_ps(g + (size_t)p * LANES));
        _mm512_storeu_ps(db + fb * LANES, sum);
    }
}

/* o = A3^T m: six vectors to three, the points' values by their powers 0, 1, 2 (infinity's in the last). */
AVX512 static inline void wgrad_rows(const __m512 m[TIN], __m512 o[3])
{
    __m512 sa = _mm512_add_ps(m[1], m[2]), da = _mm512_sub_ps(m[1], m[2]);
    __m512 sb = _mm512_add_ps(m[3], m[4]), db = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], sa), sb);
    o[1] = _mm512_fmadd_ps(_mm512_set1_ps(3.f / 4), da, _mm512_mul_ps(_mm512_set1_ps(3.f / 2), db));
    o[2] =
        _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(9.f / 16), sa, _mm512_mul_ps(_mm512_set1_ps(9.f / 4), sb)), m[5]);
}

/* dw[f][c] = A3^T Mw[.][c][f] A3 for 16 filters at a time: the 6 x 6 sums back to 3 x 3 taps. */
AVX512 static void wgrad_output(const float *Mw, float *dw, int C, int F)
{
    __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                    _mm512_set1_epi32(C * 9));
    for (int c = 0; c < C; c++)
        for (int f0 = 0; f0 < F; f0 += LANES) {
            __m512 r[3][TIN];
            UNROLL
            for (int j = 0; j < TIN; j++) {
                __m512 m[TIN], o[3];
                UNROLL
                for (int i = 0; i < TIN; i++)
                    m[i] = _mm512_loadu_ps(Mw + ((size_t)(i * TIN + j) * C + c) * F + f0);
                wgrad_rows(m, o);
                UNROLL
                for (int u = 0; u < 3; u++)
                    r[u][j] = o[u];
            }
            UNROLL
            for (int u = 0; u < 3; u++) {
                __m512 o[3];
                wgrad_rows(r[u], o);
                UNROLL
                for (int v = 0; v < 3; v++)
                    _mm512_i32scatter_ps(dw + ((size_t)f0 * C + c) * 9 + u * 3 + v, at, o[v], 4);
            }
        }
}

void wino43_wgrad_finish(float *ws, int parts, float *dw, float *db, int C, int F)
{
    size_t part = wino43_wgrad_part_size(C, F);
    /* the parts' sums in part order: the same bits for the same number of parts */
    for (int p = 1; p < parts; p++)
        for (size_t i = 0; i < (size_t)E * C * F; i++)
            ws[i] += ws[p * part + i];
    for (int p = 1; p < parts; p++)
        for (int f = 0; f < F; f++)
            ws[part - F + f] += ws[(p + 1) * part - F + f];
    wgrad_output(ws, dw, C, F);
    memcpy(db, ws + part - F, (size_t)F * sizeof(float));
}

void wino43_backward_weights(const float *x, const float *dy, float *dw, float *db, float *ws, int parts, int N, int C,
                             int H, int W, int F)
{
    size_t part = wino43_wgrad_part_size(C, F), xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int p = 0; p < parts; p++) {
        wino43_wgrad_start(ws + p * part, C, F);
        for (int n = wino43_part_first(N, parts, p); n < wino43_part_first(N, parts, p + 1); n++)
            wino43_wgrad_sample(x + n * xs, dy + n * ys, ws + p * part, C, H, W, F);
    }
    wino43_wgrad_finish(ws, parts, dw, db, C, F);
}
