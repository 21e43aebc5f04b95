#include "nn/cpu/nchw16c.h"

#include <string.h>

#include "nn/ops.h"
#include "nn/cpu/cpu_isa.h"
#include "nn/cpu/simd.h"
#include "base/threads.h"

/* The pixel (h, w) of channel block cb in one sample's blocks: 16 channels. */
static inline size_t blocked_at(int cb, int H, int W, int h, int w)
{
    return (((size_t)cb * H + h) * W + w) * CHANNEL_BLOCK;
}

/* The geometry of one call: CB blocks of channels, N samples, H x W inputs pooled into P = OH x OW outputs
 * per plane, argmaxes as indices into planes with rows of ld. */
typedef struct {
    int CB, N, H, W, ld, OW, P;
} pool_geom;

static pool_geom geom(int C, int N, int H, int W, int ld)
{
    return (pool_geom){C / CHANNEL_BLOCK, N, H, W, ld, W / 2, (H / 2) * (W / 2)};
}

/* The output after (ph, pw) in its plane, without a division per output. */
static inline void next_output(const pool_geom *g, int *ph, int *pw)
{
    if (++*pw == g->OW) {
        *pw = 0;
        ++*ph;
    }
}

/* Sixteen vectors of 16 lanes (one per row of a 16 x 16 tile), transposed in registers. Level s swaps the
 * off-diagonal s x s blocks of every 2s x 2s block, rows i and i + s exchanging halves (64 two-source
 * shuffles in all; element moves only, so floats and integers alike). */
typedef float vec16 __attribute__((vector_size(CHANNEL_BLOCK * sizeof(float))));
#define LO(s, p) ((p) % (2 * (s)) < (s) ? (p) : (p) + CHANNEL_BLOCK - (s))
#define HI(s, p) ((p) % (2 * (s)) < (s) ? (p) + (s) : (p) + CHANNEL_BLOCK)
#define LANES(F, s)                                                                                               \
    F(s, 0), F(s, 1), F(s, 2), F(s, 3), F(s, 4), F(s, 5), F(s, 6), F(s, 7), F(s, 8), F(s, 9), F(s, 10), F(s, 11), \
        F(s, 12), F(s, 13), F(s, 14), F(s, 15)
#define TRANSPOSE_LEVEL(r, s)                                                   \
    _Pragma("GCC unroll 16") /* constant indices: the rows stay in registers */ \
        for (int i = 0; i < CHANNEL_BLOCK; i++) if (!(i & (s)))                 \
    {                                                                           \
        vec16 lo = r[i], hi = r[i + (s)];                                       \
        r[i] = __builtin_shufflevector(lo, hi, LANES(LO, s));                   \
        r[i + (s)] = __builtin_shufflevector(lo, hi, LANES(HI, s));             \
    }

static inline __attribute__((always_inline)) void transpose16(vec16 r[CHANNEL_BLOCK])
{
    TRANSPOSE_LEVEL(r, 8)
    TRANSPOSE_LEVEL(r, 4)
    TRANSPOSE_LEVEL(r, 2)
    TRANSPOSE_LEVEL(r, 1)
}

/* Eight vectors of 8 lanes transposed in registers: the 128-bit halves exchanged first (what loads can do),
 * then a 4 x 4 transpose within each half (unpacks, then shuffles of pairs), the steps AVX2 has. */
typedef float vec8 __attribute__((vector_size(8 * sizeof(float))));
static inline __attribute__((always_inline)) void transpose8(vec8 r[8])
{
    vec8 x[8];
    for (int i = 0; i < 4; i++) {
        x[i] = __builtin_shufflevector(r[i], r[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        x[i + 4] = __builtin_shufflevector(r[i], r[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
    for (int g = 0; g < 8; g += 4) {
        vec8 t0 = __builtin_shufflevector(x[g], x[g + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        vec8 t1 = __builtin_shufflevector(x[g + 2], x[g + 3], 0, 8, 1, 9, 4, 12, 5, 13);
        vec8 t2 = __builtin_shufflevector(x[g], x[g + 1], 2, 10, 3, 11, 6, 14, 7, 15);
        vec8 t3 = __builtin_shufflevector(x[g + 2], x[g + 3], 2, 10, 3, 11, 6, 14, 7, 15);
        r[g] = __builtin_shufflevector(t0, t1, 0, 1, 8, 9, 4, 5, 12, 13);
        r[g + 1] = __builtin_shufflevector(t0, t1, 2, 3, 10, 11, 6, 7, 14, 15);
        r[g + 2] = __builtin_shufflevector(t2, t3, 0, 1, 8, 9, 4, 5, 12, 13);
        r[g + 3] = __builtin_shufflevector(t2, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    }
}

/* dst[j][i] = src[i][j] for a 16 x 16 tile of 32-bit elements (floats or integers: moves only), rows lds and
 * ldd elements apart. With AVX-512 (wide) in 16 registers of 16 lanes; otherwise as four 8 x 8 blocks in
 * turn, which fit AVX2's 16 registers (sixteen rows of 16 lanes would take 32 and spill, 1.4x the pools'
 * time on Zen 3). */
static inline __attribute__((always_inline)) void transpose_tile(const void *src, size_t lds, void *dst, size_t ldd,
                                                                 int wide)
{
    if (wide) {
        vec16 r[CHANNEL_BLOCK];
        for (int i = 0; i < CHANNEL_BLOCK; i++)
            memcpy(&r[i], (const float *)src + (size_t)i * lds, sizeof r[i]);
        transpose16(r);
        for (int j = 0; j < CHANNEL_BLOCK; j++)
            memcpy((float *)dst + (size_t)j * ldd, &r[j], sizeof r[j]);
        return;
    }
    for (int bi = 0; bi < 2; bi++)
        for (int bj = 0; bj < 2; bj++) {
            vec8 r[8];
            for (int i = 0; i < 8; i++)
                memcpy(&r[i], (const float *)src + (size_t)(8 * bi + i) * lds + 8 * bj, sizeof r[i]);
            transpose8(r);
            for (int j = 0; j < 8; j++)
                memcpy((float *)dst + (size_t)(8 * bj + j) * ldd + 8 * bi, &r[j], sizeof r[j]);
        }
}

/* Whether the tiles take the 16-lane transpose: where the kernels may use AVX-512 (cpu_isa.h). */
static int wide_tiles(void) { return cpu_isa_own() == CPU_ISA_AVX512; }

/* A tile's rows: 64-byte aligned, so the transposes' vectors load and store whole. */
#define TILE_ALIGNED __attribute__((aligned(64)))

WIDE_CLONES void nchw16c_transpose(const float *src, size_t lds, float *dst, size_t ldd, int wide)
{
    transpose_tile(src, lds, dst, ldd, wide);
}

/* Outputs o0 .. o0+len-1 (len <= 16) of sample n's channel block cb (x: the sample's blocks): pooled across
 * the 16 channels of each window (four 16-channel vectors), transposed, then bias and ReLU along each
 * channel's row of outputs. */
static inline __attribute__((always_inline)) void forward_tile(const pool_geom *g, const float *x, const float *b,
                                                               float *y, int32_t *arg, int n, int cb, int o0, int len,
                                                               int wide)
{
    TILE_ALIGNED float m[CHANNEL_BLOCK][CHANNEL_BLOCK], mc[CHANNEL_BLOCK][CHANNEL_BLOCK];
    TILE_ALIGNED int32_t a[CHANNEL_BLOCK][CHANNEL_BLOCK], ac[CHANNEL_BLOCK][CHANNEL_BLOCK];
    for (int o = 0, ph = o0 / g->OW, pw = o0 % g->OW; o < CHANNEL_BLOCK; o++, next_output(g, &ph, &pw)) {
        float *mv = m[o];
        int32_t *av = a[o];
        if (o >= len) {
            memset(mv, 0, sizeof m[o]);
            memset(av, 0, sizeof a[o]);
            continue;
        }
        int i = 2 * ph * g->ld + 2 * pw;
        const float *v = x + blocked_at(cb, g->H, g->W, 2 * ph, 2 * pw);
        const float *u = v + (size_t)g->W * CHANNEL_BLOCK;
        SIMD
        for (int c = 0; c < CHANNEL_BLOCK; c++)
            mv[c] = op_max4(v[c], v[CHANNEL_BLOCK + c], u[c], u[CHANNEL_BLOCK + c], i, g->ld, &av[c]);
    }
    transpose_tile(m, CHANNEL_BLOCK, mc, CHANNEL_BLOCK, wide);
    transpose_tile(a, CHANNEL_BLOCK, ac, CHANNEL_BLOCK, wide);
    for (int c = 0; c < CHANNEL_BLOCK; c++) {
        size_t at = ((size_t)(cb * CHANNEL_BLOCK + c) * g->N + n) * g->P + o0;
        float bias = b ? b[cb * CHANNEL_BLOCK + c] : 0.0f; /* relu(m + 0) is relu(m), bit for bit */
        SIMD
        for (int o = 0; o < len; o++) {
            y[at + o] = op_bias_relu(mc[c][o], bias);
            arg[at + o] = ac[c][o];
        }
    }
}

/* Outputs per chunk of the backward: each channel's run of them is read in one go (three streams at a
 * time: dy, y, arg), not 16 values at a time from 48 planes, which defeats the hardware prefetchers. The
 * forward's 16-output tiles write their 32 runs directly, which is no slower. */
enum { CHUNK = 256 };

/* The gradients of outputs o0 .. o0+len-1 (len <= CHUNK) of sample n's channel block cb (dx: its blocks). Each
 * channel's run goes through the ReLU into a [16][CHUNK] buffer, then tile by tile transposed so that every
 * output's 16 channels spread over its window (zeros where the argmax was not). */
static inline __attribute__((always_inline)) void backward_chunk(const pool_geom *g, const float *dy, const float *y,
                                                                 const int32_t *arg, float *dx, int n, int cb, int o0,
                                                                 int len, int wide)
{
    TILE_ALIGNED float gb[CHANNEL_BLOCK][CHUNK];
    TILE_ALIGNED int32_t ab[CHANNEL_BLOCK][CHUNK];
    for (int c = 0; c < CHANNEL_BLOCK; c++) {
        size_t at = ((size_t)(cb * CHANNEL_BLOCK + c) * g->N + n) * g->P + o0;
        SIMD
        for (int o = 0; o < len; o++) {
            gb[c][o] = op_relu_grad(dy[at + o], y[at + o]);
            ab[c][o] = arg[at + o];
        }
        for (int o = len; o % CHANNEL_BLOCK; o++) /* the last tile's unused lanes, defined */
            gb[c][o] = 0.0f, ab[c][o] = 0;
    }
    for (int t = 0, ph = o0 / g->OW, pw = o0 % g->OW; t < len; t += CHANNEL_BLOCK) {
        TILE_ALIGNED float gr[CHANNEL_BLOCK][CHANNEL_BLOCK];
        TILE_ALIGNED int32_t ar[CHANNEL_BLOCK][CHANNEL_BLOCK];
        transpose_tile(&gb[0][t], CHUNK, gr, CHANNEL_BLOCK, wide);
        transpose_tile(&ab[0][t], CHUNK, ar, CHANNEL_BLOCK, wide);
        for (int o = 0; o < CHANNEL_BLOCK && t + o < len; o++, next_output(g, &ph, &pw)) {
            int i = 2 * ph * g->ld + 2 * pw, ld = g->ld;
            float *v = dx + blocked_at(cb, g->H, g->W, 2 * ph, 2 * pw), *u = v + (size_t)g->W * CHANNEL_BLOCK;
            const float *gv = gr[o];
            const int32_t *av = ar[o];
            SIMD
            for (int c = 0; c < CHANNEL_BLOCK; c++) {
                v[c] = op_window_grad(gv[c], av[c], i);
                v[CHANNEL_BLOCK + c] = op_window_grad(gv[c], av[c], i + 1);
                u[c] = op_window_grad(gv[c], av[c], i + ld);
                u[CHANNEL_BLOCK + c] = op_window_grad(gv[c], av[c], i + ld + 1);
            }
        }
    }
}

/* call for every tile of count outputs or pixels: the full ones with len the constant 16 (their loops
 * then have fixed bounds), the last one with what is left. */
#define TILES(count, o0, len, call)                                \
    do {                                                           \
        int o0 = 0, len = CHANNEL_BLOCK;                           \
        for (; o0 + CHANNEL_BLOCK <= (count); o0 += CHANNEL_BLOCK) \
            call;                                                  \
        if ((len = -o0 + (count)) > 0)                             \
            call;                                                  \
    } while (0)

static int chunk_len(const pool_geom *g, int o0) { return g->P - o0 < CHUNK ? g->P - o0 : CHUNK; }

/* Pixels in no window (an odd last row or column) get no gradient. */
static void zero_unpooled(float *dxb, int H, int W)
{
    for (int h = 0; h < H; h++)
        for (int w = h < H / 2 * 2 ? W / 2 * 2 : 0; w < W; w++)
            memset(dxb + ((size_t)h * W + w) * CHANNEL_BLOCK, 0, CHANNEL_BLOCK * sizeof(float));
}

/* The tiles of the inlined functions above, in the clones' vector width. */
WIDE_CLONES void nchw16c_maxpool2_relu_forward_sample(const float *xs, const float *b, float *y, int32_t *arg, int C,
                                                      int N, int n, int H, int W, int ld)
{
    pool_geom g = geom(C, N, H, W, ld);
    int wide = wide_tiles();
    for (int cb = 0; cb < g.CB; cb++)
        TILES(g.P, o0, len, forward_tile(&g, xs, b, y, arg, n, cb, o0, len, wide));
}

void nchw16c_maxpool2_relu_forward(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                                   int ld)
{
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        nchw16c_maxpool2_relu_forward_sample(x + (size_t)n * C * H * W, b, y, arg, C, N, n, H, W, ld);
}

WIDE_CLONES void nchw16c_relu_maxpool2_backward_sample(const float *dy, const float *y, const int32_t *arg, float *dxs,
                                                       int C, int N, int n, int H, int W, int ld)
{
    pool_geom g = geom(C, N, H, W, ld);
    int wide = wide_tiles();
    for (int cb = 0; cb < g.CB; cb++) {
        for (int o0 = 0; o0 < g.P; o0 += CHUNK)
            backward_chunk(&g, dy, y, arg, dxs, n, cb, o0, chunk_len(&g, o0), wide);
        zero_unpooled(dxs + blocked_at(cb, H, W, 0, 0), H, W);
    }
}

void nchw16c_relu_maxpool2_backward(const float *dy, const float *y, const int32_t *arg, float *dx, int C, int N, int H,
                                    int W, int ld)
{
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        nchw16c_relu_maxpool2_backward_sample(dy, y, arg, dx + (size_t)n * C * H * W, C, N, n, H, W, ld);
}

/* Pixels p0 .. p0+len-1 (len <= CHUNK) of sample n's channel block cb (dxs: its blocks): tile by tile transposed
 * into a [16][CHUNK] buffer. Then each channel's run goes through the ReLU's gradient into its plane, three
 * streams at a time as in backward_chunk, not 16 values at a time to 16 planes, which defeats the prefetchers. */
static inline __attribute__((always_inline)) void relu_chunk(const float *dxs, const float *y, float *dx, int N, int HW,
                                                             int n, int cb, int p0, int len, int wide)
{
    TILE_ALIGNED float gb[CHANNEL_BLOCK][CHUNK];
    const float *src = dxs + ((size_t)cb * HW + p0) * CHANNEL_BLOCK;
    for (int t = 0; t < len; t += CHANNEL_BLOCK) {
        if (t + CHANNEL_BLOCK <= len) {
            transpose_tile(src + (size_t)t * CHANNEL_BLOCK, CHANNEL_BLOCK, &gb[0][t], CHUNK, wide);
            continue;
        }
        TILE_ALIGNED float r[CHANNEL_BLOCK][CHANNEL_BLOCK] = {{0}};
        memcpy(r, src + (size_t)t * CHANNEL_BLOCK, (size_t)(len - t) * sizeof r[0]); /* the last pixels, zeros after */
        transpose_tile(r, CHANNEL_BLOCK, &gb[0][t], CHUNK, wide);
    }
    for (int c = 0; c < CHANNEL_BLOCK; c++) {
        size_t at = ((size_t)(cb * CHANNEL_BLOCK + c) * N + n) * HW + p0;
        SIMD
        for (int p = 0; p < len; p++)
            dx[at + p] = op_relu_grad(gb[c][p], y[at + p]);
    }
}

WIDE_CLONES void nchw16c_relu_backward_sample(const float *dxs, const float *y, float *dx, int C, int N, int n, int HW)
{
    int wide = wide_tiles();
    for (int cb = 0; cb < C / CHANNEL_BLOCK; cb++)
        for (int p0 = 0; p0 < HW; p0 += CHUNK)
            relu_chunk(dxs, y, dx, N, HW, n, cb, p0, HW - p0 < CHUNK ? HW - p0 : CHUNK, wide);
}

/* Pixels p0 .. p0+len-1 (len <= 16) of sample n's channel block cb from its planes: the 16 channels' runs,
 * transposed into 16 pixel vectors of xs (the sample's blocks). */
static inline __attribute__((always_inline)) void blocks_tile(const float *x, float *xs, int N, int HW, int n, int cb,
                                                              int p0, int len, int wide)
{
    TILE_ALIGNED float r[CHANNEL_BLOCK][CHANNEL_BLOCK] = {{0}}, t[CHANNEL_BLOCK][CHANNEL_BLOCK];
    for (int c = 0; c < CHANNEL_BLOCK; c++)
        memcpy(r[c], x + ((size_t)(cb * CHANNEL_BLOCK + c) * N + n) * HW + p0, (size_t)len * sizeof(float));
    transpose_tile(r, CHANNEL_BLOCK, t, CHANNEL_BLOCK, wide);
    memcpy(xs + ((size_t)cb * HW + p0) * CHANNEL_BLOCK, t, (size_t)len * sizeof t[0]);
}

WIDE_CLONES void nchw16c_blocks_sample(const float *x, float *xs, int C, int N, int n, int HW)
{
    int wide = wide_tiles();
    for (int cb = 0; cb < C / CHANNEL_BLOCK; cb++)
        TILES(HW, p0, len, blocks_tile(x, xs, N, HW, n, cb, p0, len, wide));
}

void nchw16c_relu_backward(const float *dxb, const float *y, float *dx, int C, int N, int HW)
{
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        nchw16c_relu_backward_sample(dxb + (size_t)n * C * HW, y, dx, C, N, n, HW);
}
