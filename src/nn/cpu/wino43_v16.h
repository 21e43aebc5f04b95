/* wino43.h's kernels written once over 16-float vectors: wino43_avx512.c and wino43_avx2.c each include a
 * v16 header, define WINO43_VARIANT and include this, so both ISAs run the same operations lane for lane
 * (the same bits; check_conv compares them). Only the product blocks' accumulator counts differ (V16_MAX_NV). */
#include <stddef.h>

#include "nn/cpu/wino43_kernels.h"

/* The small fixed loops unrolled at -O2 too, so the tiles and accumulators stay in registers (not unrolled,
 * the forward is far slower: docs/performance.md). */
#define UNROLL _Pragma("GCC unroll 16")

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

/* U[e][i][o0..o0+15] = (G g G^T)[e] for input channel i and 16 output channels from o0, g gathered across them.
 * Output o's taps for input i are at w + o * out_stride + i * in_stride, turned by 180 degrees if flip. */
V16_TARGET static void weights_block(const float *w, int out_stride, int in_stride, int flip, int cin, int cout, int i,
                                     int o0, float *U)
{
    v16 g[9], t[TIN][3];
    UNROLL
    for (int k = 0; k < 9; k++)
        g[k] = v16_gather(w + (size_t)o0 * out_stride + (size_t)i * in_stride + (flip ? 8 - k : k), out_stride);
    UNROLL
    for (int a = 0; a < TIN; a++)
        UNROLL
    for (int j = 0; j < 3; j++)
        t[a][j] = v16_fmadd(v16_set1(G[a][2]), g[6 + j],
                            v16_fmadd(v16_set1(G[a][1]), g[3 + j], v16_mul(v16_set1(G[a][0]), g[j])));
    UNROLL
    for (int a = 0; a < TIN; a++)
        UNROLL
    for (int j = 0; j < TIN; j++) {
        v16 u = v16_fmadd(t[a][2], v16_set1(G[j][2]),
                          v16_fmadd(t[a][1], v16_set1(G[j][1]), v16_mul(t[a][0], v16_set1(G[j][0]))));
        v16_store(U + ((size_t)(a * TIN + j) * cin + i) * cout + o0, u);
    }
}

V16_TARGET static void weights(const float *w, int F, int C, float *U)
{
    for (int c = 0; c < C; c++)
        for (int f0 = 0; f0 < F; f0 += LANES)
            weights_block(w, C * 9, 9, 0, C, F, c, f0, U);
}

/* The input gradient's: input channels the filters, output channels the channels, each kernel turned. */
V16_TARGET static void weights_backward(const float *w, int F, int C, float *U)
{
    for (int f = 0; f < F; f++)
        for (int c0 = 0; c0 < C; c0 += LANES)
            weights_block(w, 9, C * 9, 1, F, C, f, c0, U);
}

/* o = B^T d, six vectors of 16 lanes: rows 1-2 and 3-4 are the points +-a, +-b, each pair sharing its even
 * part (d4 - q d2) and its odd part (r d3 - p d1) with opposite signs. */
V16_TARGET static inline void input_rows(const v16 d[TIN], v16 o[TIN])
{
    v16 c0 = v16_set1(81.f / 64), c1 = v16_set1(45.f / 16);
    v16 ea = v16_fnmadd(v16_set1(9.f / 4), d[2], d[4]);
    v16 oa = v16_fnmadd(v16_set1(27.f / 16), d[1], v16_mul(v16_set1(3.f / 4), d[3]));
    v16 eb = v16_fnmadd(v16_set1(9.f / 16), d[2], d[4]);
    v16 ob = v16_fnmadd(v16_set1(27.f / 32), d[1], v16_mul(v16_set1(3.f / 2), d[3]));
    o[0] = v16_fmadd(c0, d[0], v16_fnmadd(c1, d[2], d[4]));
    o[1] = v16_add(ea, oa);
    o[2] = v16_sub(ea, oa);
    o[3] = v16_add(eb, ob);
    o[4] = v16_sub(eb, ob);
    o[5] = v16_fmadd(c0, d[1], v16_fnmadd(c1, d[3], d[5]));
}

/* o = A^T m: six vectors to four; row i weighs the points' values by their i-th powers. */
V16_TARGET static inline void output_rows(const v16 m[TIN], v16 o[TILE])
{
    v16 sa = v16_add(m[1], m[2]), da = v16_sub(m[1], m[2]);
    v16 sb = v16_add(m[3], m[4]), db = v16_sub(m[3], m[4]);
    o[0] = v16_add(v16_add(m[0], sa), sb);
    o[1] = v16_fmadd(v16_set1(3.f / 4), da, v16_mul(v16_set1(3.f / 2), db));
    o[2] = v16_fmadd(v16_set1(9.f / 16), sa, v16_mul(v16_set1(9.f / 4), sb));
    o[3] = v16_add(v16_fmadd(v16_set1(27.f / 64), da, v16_mul(v16_set1(27.f / 8), db)), m[5]);
}

/* A convolution without bias over 16-channel blocks: cin channels of ih x iw in, read with pad zeros around,
 * cout channels of oh x ow out (tiles at the bottom and right edges cut short). */
typedef struct {
    int cin, cout, ih, iw, pad, oh, ow;
} geometry;

/* V[e * stride] = (B^T d B)[e] of the 6 x 6 input tile whose corner is row r0, column c0 of channel block xb
 * (ih x iw pixels of 16 lanes: 16 channels); outside the plane d is 0. */
V16_TARGET static void input_tile(const float *xb, int ih, int iw, int r0, int c0, float *V, size_t stride)
{
    int inside = r0 >= 0 && c0 >= 0 && r0 + TIN <= ih && c0 + TIN <= iw;
    v16 r[TIN][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        v16 d[TIN], o[TIN];
        UNROLL
        for (int i = 0; i < TIN; i++)
            d[i] = inside || ((unsigned)(r0 + i) < (unsigned)ih && (unsigned)(c0 + j) < (unsigned)iw)
                       ? v16_load(xb + ((ptrdiff_t)(r0 + i) * iw + c0 + j) * LANES)
                       : v16_zero();
        input_rows(d, o);
        UNROLL
        for (int i = 0; i < TIN; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TIN; i++) {
        v16 o[TIN];
        input_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TIN; j++)
            v16_store(V + (i * TIN + j) * stride, o[j]);
    }
}

/* M[e][t][o] = sum over i of U[e][i][o] V[e][i][t], for tb tiles and cout outputs, nv vectors of them at a
 * time (nv and tb constants where inlined: the accumulators stay in registers). */
V16_TARGET static inline __attribute__((always_inline)) void products_nv(const float *U, const float *V, float *M,
                                                                         int cin, int cout, int nv, int tb)
{
    for (int e = 0; e < E; e++)
        for (int o0 = 0; o0 < cout; o0 += nv * LANES) {
            v16 acc[TB7][4];
            UNROLL
            for (int t = 0; t < tb; t++)
                UNROLL
            for (int k = 0; k < nv; k++)
                acc[t][k] = v16_zero();
            const float *u = U + (size_t)e * cin * cout + o0;
            const float *v = V + (size_t)e * cin * tb;
            /* Channel c is lane c % LANES of V's block c / LANES: two loops, so that each step only moves
             * two pointers (one loop over c spent as many instructions on its indices as on its loads). */
            for (int cb = 0; cb < cin / LANES; cb++) {
                const float *vc = v + (size_t)cb * tb * LANES, *uc = u + (size_t)cb * LANES * cout;
                for (int cl = 0; cl < LANES; cl++, vc++, uc += cout) {
                    v16 uk[4];
                    UNROLL
                    for (int k = 0; k < nv; k++)
                        uk[k] = v16_load(uc + 16 * k);
                    UNROLL
                    for (int t = 0; t < tb; t++) {
                        v16 b = v16_set1(vc[t * LANES]);
                        UNROLL
                        for (int k = 0; k < nv; k++)
                            acc[t][k] = v16_fmadd(uk[k], b, acc[t][k]);
                    }
                }
            }
            UNROLL
            for (int t = 0; t < tb; t++)
                UNROLL
            for (int k = 0; k < nv; k++)
                v16_store(M + ((size_t)e * tb + t) * cout + o0 + 16 * k, acc[t][k]);
        }
}

V16_TARGET static void products(const float *U, const float *V, float *M, int cin, int cout, int tb)
{
    if (tb == TB7 && V16_MAX_NV >= 2 && cout % (2 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 2, TB7);
    else if (tb == TB7)
        products_nv(U, V, M, cin, cout, 1, TB7);
    else if (V16_MAX_NV >= 4 && cout % (4 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 4, TB);
    else if (V16_MAX_NV >= 2 && cout % (2 * LANES) == 0)
        products_nv(U, V, M, cin, cout, 2, TB);
    else
        products_nv(U, V, M, cin, cout, 1, TB);
}

/* Tiles per block: seven where they come in sevens and the outputs fit 7 x 2 accumulators (the input
 * gradient's 7 x 7 tiles: 49 in 9 blocks of six would compute 54), else six. AVX2's 16 registers hold six
 * tiles' accumulators beside the operands, not seven: there the 5 extra tiles cost less than a spill. */
static int block_tiles(int tiles, int cout)
{
    return V16_REGS >= 32 && tiles % TB7 == 0 && cout % (4 * LANES) != 0 ? TB7 : TB;
}

/* The tile's nr x nc pixels of output block ob at yb (16 lanes: 16 channels) = A^T M A + bias. */
V16_TARGET static void output_tile(const float *M, int cout, int tb, int ob, int t, v16 bias, float *yb, int ow, int nr,
                                   int nc)
{
    v16 r[TILE][TIN];
    UNROLL
    for (int j = 0; j < TIN; j++) {
        v16 m[TIN], o[TILE];
        UNROLL
        for (int i = 0; i < TIN; i++)
            m[i] = v16_load(M + ((size_t)(i * TIN + j) * tb + t) * cout + ob * LANES);
        output_rows(m, o);
        UNROLL
        for (int i = 0; i < TILE; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TILE; i++) {
        v16 o[TILE];
        output_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TILE; j++)
            if (i < nr && j < nc)
                v16_store(yb + ((size_t)i * ow + j) * LANES, v16_add(o[j], bias));
    }
}

/* One sample: its tiles in blocks of tb (the last block repeats the last tile and writes it once). */
V16_TARGET static void conv_sample(const float *x, const float *U, const float *b, float *y, const geometry *g)
{
    int tw = (g->ow + TILE - 1) / TILE, tiles = (g->oh + TILE - 1) / TILE * tw, CB = g->cin / LANES,
        tb = block_tiles(tiles, g->cout);
    /* Per thread, not on the stack: as locals these made the forward slower (docs/performance.md). */
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
            v16 bias = b ? v16_load(b + ob * LANES) : v16_zero();
            for (int t = 0; t < tb && t0 + t < tiles; t++) {
                int ty = (t0 + t) / tw, tx = (t0 + t) % tw, nr = g->oh - TILE * ty, nc = g->ow - TILE * tx;
                output_tile(M, g->cout, tb, ob, t, bias,
                            y + (((size_t)ob * g->oh + TILE * ty) * g->ow + TILE * tx) * LANES, g->ow,
                            nr < TILE ? nr : TILE, nc < TILE ? nc : TILE);
            }
        }
    }
}

V16_TARGET static void forward_sample(const float *x, const float *U, const float *b, float *y, int C, int H, int W,
                                      int F)
{
    geometry g = {C, F, H, W, 0, H - 2, W - 2};
    conv_sample(x, U, b, y, &g);
}

/* The input gradient is the correlation of dy, padded by 2, with the turned kernels. */
V16_TARGET static void backward_data_sample(const float *dy, const float *U, float *dx, int C, int H, int W, int F)
{
    geometry g = {F, C, H - 2, W - 2, 2, H, W};
    conv_sample(dy, U, NULL, dx, &g);
}

/* o = G4 d: four vectors to six; rows 1-2 and 3-4 share their even and odd parts with opposite signs. */
V16_TARGET static inline void gradient_rows(const v16 d[TILE], v16 o[TIN])
{
    v16 ea = v16_fmadd(v16_set1(-128.f / 243), d[0], v16_mul(v16_set1(-8.f / 27), d[2]));
    v16 oa = v16_fmadd(v16_set1(-32.f / 81), d[1], v16_mul(v16_set1(-2.f / 9), d[3]));
    v16 eb = v16_fmadd(v16_set1(32.f / 243), d[0], v16_mul(v16_set1(8.f / 27), d[2]));
    v16 ob = v16_fmadd(v16_set1(16.f / 81), d[1], v16_mul(v16_set1(4.f / 9), d[3]));
    o[0] = v16_mul(v16_set1(64.f / 81), d[0]);
    o[1] = v16_add(ea, oa);
    o[2] = v16_sub(ea, oa);
    o[3] = v16_add(eb, ob);
    o[4] = v16_sub(eb, ob);
    o[5] = d[3];
}

/* D[e][t][16 lanes] = (G4 dy G4^T)[e] of the 4 x 4 gradient tile at dyb (rows of ow pixels); row stride of
 * D is ld floats. */
V16_TARGET static void gradient_tile(const float *dyb, int ow, float *D, int ld, int t)
{
    v16 r[TIN][TILE];
    UNROLL
    for (int j = 0; j < TILE; j++) {
        v16 d[TILE], o[TIN];
        UNROLL
        for (int i = 0; i < TILE; i++)
            d[i] = v16_load(dyb + ((size_t)i * ow + j) * LANES);
        gradient_rows(d, o);
        UNROLL
        for (int i = 0; i < TIN; i++)
            r[i][j] = o[i];
    }
    UNROLL
    for (int i = 0; i < TIN; i++) {
        v16 o[TIN];
        gradient_rows(r[i], o);
        UNROLL
        for (int j = 0; j < TIN; j++)
            v16_store(D + (i * TIN + j) * point_stride(ld) + (size_t)t * ld, o[j]);
    }
}

/* Mw[e][c0 + i][f0 ..] += sum over t < nt of V[e][t][c0 + i] D[e][t][f0 ..], for nc channels by nv vectors of
 * filters (constants where inlined: the accumulators stay in registers). */
V16_TARGET static inline __attribute__((always_inline)) void wgrad_block(const float *v, const float *d, float *m,
                                                                         int C, int F, int nt, int nc, int nv)
{
    v16 acc[6][4];
    UNROLL
    for (int i = 0; i < nc; i++) {
        UNROLL
        for (int k = 0; k < nv; k++)
            acc[i][k] = v16_load(m + (size_t)i * F + LANES * k);
    }
    for (int t = 0; t < nt; t++) {
        v16 dk[4];
        UNROLL
        for (int k = 0; k < nv; k++)
            dk[k] = v16_load(d + (size_t)t * F + LANES * k);
        UNROLL
        for (int i = 0; i < nc; i++) {
            v16 b = v16_set1(v[(size_t)t * C + i]);
            UNROLL
            for (int k = 0; k < nv; k++)
                acc[i][k] = v16_fmadd(dk[k], b, acc[i][k]);
        }
    }
    UNROLL
    for (int i = 0; i < nc; i++) {
        UNROLL
        for (int k = 0; k < nv; k++)
            v16_store(m + (size_t)i * F + LANES * k, acc[i][k]);
    }
}

/* Mw[e][c][f] += sum over t < nt of V[e][t][c] D[e][t][f]: four channels by nv vectors of filters at a time.
 * With one vector (AVX2), six channels where the rest still splits into fours: 4 x 2 halves are too few
 * independent multiply-add chains to hide their latency, 6 x 2 fit beside the operands. */
V16_TARGET static inline __attribute__((always_inline)) void wgrad_products_nv(const float *V, const float *D,
                                                                               float *Mw, int C, int F, int nt, int nv)
{
    for (int e = 0; e < E; e++) {
        const float *v = V + e * point_stride(C), *d = D + e * point_stride(F);
        float *m = Mw + (size_t)e * C * F;
        for (int c0 = 0, nc; c0 < C; c0 += nc) {
            nc = nv == 1 && (C - c0 == 6 || C - c0 >= 10) ? 6 : 4;
            for (int f0 = 0; f0 < F; f0 += nv * LANES) {
                if (nc == 6)
                    wgrad_block(v + c0, d + f0, m + (size_t)c0 * F + f0, C, F, nt, 6, nv);
                else
                    wgrad_block(v + c0, d + f0, m + (size_t)c0 * F + f0, C, F, nt, 4, nv);
            }
        }
    }
}

V16_TARGET static void wgrad_products(const float *V, const float *D, float *Mw, int C, int F, int nt)
{
    if (V16_MAX_NV >= 4 && F % (4 * LANES) == 0)
        wgrad_products_nv(V, D, Mw, C, F, nt, 4);
    else if (V16_MAX_NV >= 2 && F % (2 * LANES) == 0)
        wgrad_products_nv(V, D, Mw, C, F, nt, 2);
    else
        wgrad_products_nv(V, D, Mw, C, F, nt, 1);
}

/* One sample's sums into the part, its tiles in blocks of WT. */
V16_TARGET static void wgrad_sample(const float *x, const float *dy, float *part, int C, int H, int W, int F)
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
        v16 sum = v16_load(db + fb * LANES);
        for (int p = 0; p < oh * ow; p++)
            sum = v16_add(sum, v16_load(g + (size_t)p * LANES));
        v16_store(db + fb * LANES, sum);
    }
}

/* o = A3^T m: six vectors to three, the points' values by their powers 0, 1, 2 (infinity's in the last). */
V16_TARGET static inline void wgrad_rows(const v16 m[TIN], v16 o[3])
{
    v16 sa = v16_add(m[1], m[2]), da = v16_sub(m[1], m[2]);
    v16 sb = v16_add(m[3], m[4]), db = v16_sub(m[3], m[4]);
    o[0] = v16_add(v16_add(m[0], sa), sb);
    o[1] = v16_fmadd(v16_set1(3.f / 4), da, v16_mul(v16_set1(3.f / 2), db));
    o[2] = v16_add(v16_fmadd(v16_set1(9.f / 16), sa, v16_mul(v16_set1(9.f / 4), sb)), m[5]);
}

/* dw[f][c] = A3^T Mw[.][c][f] A3 for 16 filters at a time: the 6 x 6 sums back to 3 x 3 taps. */
V16_TARGET static void wgrad_output(const float *Mw, float *dw, int C, int F)
{
    for (int c = 0; c < C; c++)
        for (int f0 = 0; f0 < F; f0 += LANES) {
            v16 r[3][TIN];
            UNROLL
            for (int j = 0; j < TIN; j++) {
                v16 m[TIN], o[3];
                UNROLL
                for (int i = 0; i < TIN; i++)
                    m[i] = v16_load(Mw + ((size_t)(i * TIN + j) * C + c) * F + f0);
                wgrad_rows(m, o);
                UNROLL
                for (int u = 0; u < 3; u++)
                    r[u][j] = o[u];
            }
            UNROLL
            for (int u = 0; u < 3; u++) {
                v16 o[3];
                wgrad_rows(r[u], o);
                UNROLL
                for (int v = 0; v < 3; v++)
                    v16_scatter(dw + ((size_t)f0 * C + c) * 9 + u * 3 + v, C * 9, o[v]);
            }
        }
}

const wino43_kernels WINO43_VARIANT = {.isa = V16_ISA,
                                       .weights = weights,
                                       .weights_backward = weights_backward,
                                       .forward_sample = forward_sample,
                                       .backward_data_sample = backward_data_sample,
                                       .wgrad_sample = wgrad_sample,
                                       .wgrad_output = wgrad_output};
