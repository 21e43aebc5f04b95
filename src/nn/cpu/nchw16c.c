#include "nn/cpu/nchw16c.h"

#include <string.h>

#include "nn/ops.h"
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

/* Outputs o0 .. o0+len-1 (len <= 16) of sample n's channel block cb (x: the sample's blocks): pooled across
 * the 16 channels of each window (four 16-channel vectors), transposed, then bias and ReLU along each
 * channel's row of outputs. */
static inline __attribute__((always_inline)) void forward_tile(const pool_geom *g, const float *x, const float *b,
                                                               float *y, int32_t *arg, int n, int cb, int o0, int len)
{
    vec16 m[CHANNEL_BLOCK], a[CHANNEL_BLOCK];
    for (int o = 0, ph = o0 / g->OW, pw = o0 % g->OW; o < CHANNEL_BLOCK; o++, next_output(g, &ph, &pw)) {
        float mv[CHANNEL_BLOCK] = {0};
        int32_t av[CHANNEL_BLOCK] = {0};
        if (o < len) {
            int i = 2 * ph * g->ld + 2 * pw;
            const float *v = x + blocked_at(cb, g->H, g->W, 2 * ph, 2 * pw);
            const float *u = v + (size_t)g->W * CHANNEL_BLOCK;
            SIMD
            for (int c = 0; c < CHANNEL_BLOCK; c++)
                mv[c] = op_max4(v[c], v[CHANNEL_BLOCK + c], u[c], u[CHANNEL_BLOCK + c], i, g->ld, &av[c]);
        }
        memcpy(&m[o], mv, sizeof mv);
        memcpy(&a[o], av, sizeof av);
    }
    transpose16(m);
    transpose16(a);
    for (int c = 0; c < CHANNEL_BLOCK; c++) {
        size_t at = ((size_t)(cb * CHANNEL_BLOCK + c) * g->N + n) * g->P + o0;
        float row[CHANNEL_BLOCK], bias = b ? b[cb * CHANNEL_BLOCK + c] : 0.0f; /* relu(m + 0) is relu(m), bit for bit */
        int32_t rowa[CHANNEL_BLOCK];
        memcpy(row, &m[c], sizeof row);
        memcpy(rowa, &a[c], sizeof rowa);
        SIMD
        for (int o = 0; o < len; o++) {
            y[at + o] = op_bias_relu(row[o], bias);
            arg[at + o] = rowa[o];
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
                                                                 int len)
{
    float gb[CHANNEL_BLOCK][CHUNK];
    int32_t ab[CHANNEL_BLOCK][CHUNK];
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
        vec16 gr[CHANNEL_BLOCK], ar[CHANNEL_BLOCK];
        for (int c = 0; c < CHANNEL_BLOCK; c++) {
            memcpy(&gr[c], &gb[c][t], sizeof gr[c]);
            memcpy(&ar[c], &ab[c][t], sizeof ar[c]);
        }
        transpose16(gr);
        transpose16(ar);
        for (int o = 0; o < CHANNEL_BLOCK && t + o < len; o++, next_output(g, &ph, &pw)) {
            int i = 2 * ph * g->ld + 2 * pw, ld = g->ld;
            float *v = dx + blocked_at(cb, g->H, g->W, 2 * ph, 2 * pw), *u = v + (size_t)g->W * CHANNEL_BLOCK;
            float gv[CHANNEL_BLOCK];
            int32_t av[CHANNEL_BLOCK];
            memcpy(gv, &gr[o], sizeof gv);
            memcpy(av, &ar[o], sizeof av);
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
    for (int cb = 0; cb < g.CB; cb++)
        TILES(g.P, o0, len, forward_tile(&g, xs, b, y, arg, n, cb, o0, len));
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
    for (int cb = 0; cb < g.CB; cb++) {
        for (int o0 = 0; o0 < g.P; o0 += CHUNK)
            backward_chunk(&g, dy, y, arg, dxs, n, cb, o0, chunk_len(&g, o0));
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
                                                             int n, int cb, int p0, int len)
{
    float gb[CHANNEL_BLOCK][CHUNK];
    const float *src = dxs + ((size_t)cb * HW + p0) * CHANNEL_BLOCK;
    for (int t = 0; t < len; t += CHANNEL_BLOCK) {
        vec16 r[CHANNEL_BLOCK];
        for (int p = 0; p < CHANNEL_BLOCK; p++) {
            float v[CHANNEL_BLOCK] = {0};
            if (t + p < len)
                memcpy(v, src + (size_t)(t + p) * CHANNEL_BLOCK, sizeof v);
            memcpy(&r[p], v, sizeof v);
        }
        transpose16(r);
        for (int c = 0; c < CHANNEL_BLOCK; c++)
            memcpy(&gb[c][t], &r[c], sizeof r[c]);
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
    for (int cb = 0; cb < C / CHANNEL_BLOCK; cb++)
        for (int p0 = 0; p0 < HW; p0 += CHUNK)
            relu_chunk(dxs, y, dx, N, HW, n, cb, p0, HW - p0 < CHUNK ? HW - p0 : CHUNK);
}

/* Pixels p0 .. p0+len-1 (len <= 16) of sample n's channel block cb from its planes: the 16 channels' runs,
 * transposed into 16 pixel vectors of xs (the sample's blocks). */
static inline __attribute__((always_inline)) void blocks_tile(const float *x, float *xs, int N, int HW, int n, int cb,
                                                              int p0, int len)
{
    vec16 r[CHANNEL_BLOCK];
    for (int c = 0; c < CHANNEL_BLOCK; c++) {
        float v[CHANNEL_BLOCK] = {0};
        memcpy(v, x + ((size_t)(cb * CHANNEL_BLOCK + c) * N + n) * HW + p0, (size_t)len * sizeof(float));
        memcpy(&r[c], v, sizeof v);
    }
    transpose16(r);
    for (int p = 0; p < len; p++)
        memcpy(xs + ((size_t)cb * HW + p0 + p) * CHANNEL_BLOCK, &r[p], sizeof r[p]);
}

WIDE_CLONES void nchw16c_blocks_sample(const float *x, float *xs, int C, int N, int n, int HW)
{
    for (int cb = 0; cb < C / CHANNEL_BLOCK; cb++)
        TILES(HW, p0, len, blocks_tile(x, xs, N, HW, n, cb, p0, len));
}

void nchw16c_relu_backward(const float *dxb, const float *y, float *dx, int C, int N, int HW)
{
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        nchw16c_relu_backward_sample(dxb + (size_t)n * C * HW, y, dx, C, N, n, HW);
}
