/* net's conv2 with its pool both ways without a column buffer (src/gpu/conv_pool_kernels.h, MNIST_DDP_CONV2=direct),
 * its kernels' blocks run on the CPU as gpu/cuda/conv_pool.cu runs them (each stage by one thread of one, then every
 * thread's share), against layers.c's composition on the CPU backend (im2col, GEMM, pool): the pooled outputs,
 * argmaxes and the three gradients within float rounding (the sums run in another order), on shapes wide and not,
 * with several channel groups, stages and sample slices. Then net trained on a CPU backend whose
 * conv_pool_forward and pool_conv_backward are these blocks, against the CPU's own composition. */
#include "../check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "gpu/conv_pool_kernels.h"
#include "gpu/conv_pool_tf32.h"
#include "nn/layers.h"
#include "nn/cpu/nn_cpu.h"
#include "base/rng.h"
#include "kernel_testutil.h"
#include "model_testutil.h"

static int emu_calls[2];

/* src/gpu/cuda/conv_pool.cu's k_cp_forward over its grid (N, F / CP_FG). */
static int emu_forward(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                       const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    if (!cp_fits(C, H, W, F, k, pad))
        return 0;
    emu_calls[0]++;
    int OW2 = (W - 2) / 2, OP = ((H - 2) / 2) * OW2;
    float *xs = malloc(CP_CC * CP_HW_MAX * sizeof *xs);
    cp_w4 *ws = malloc(CP_CC * 9 * CP_FG / 4 * sizeof *ws);
    float(*acc)[CP_FG][4] = malloc((size_t)OP * sizeof *acc);
    for (int n = 0; n < N; n++)
        for (int f0 = 0; f0 < F; f0 += CP_FG) {
            memset(acc, 0, (size_t)OP * sizeof *acc);
            for (int c0 = 0; c0 < C; c0 += CP_CC) {
                cp_stage(0, 1, x, w, xs, ws, C, N, H, W, n, f0, c0);
                for (int t = 0; t < OP; t++)
                    cp_window_acc(xs, ws, H, W, t / OW2, t % OW2, acc[t]);
            }
            for (int t = 0; t < OP; t++)
                cp_window_out(acc[t], pb, py, arg, fd, F, N, H - 2, W - 2, wide ? W : W - 2, n, f0, t);
        }
    free(xs), free(ws), free(acc);
    return 1;
}

/* k_cp_wgrad over its grid (F / CPW_FG, C / CPW_CC, slices), the last slice of each (f0, c0) finishing it;
 * then k_cp_xgrad over (N, C / CPX_CG). */
static int emu_backward(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg, const float *x,
                        const float *x_relu, const float *w, float *dw, float *db, float *dx, int N, int C, int H,
                        int W, int F, int k, int pad, int wide)
{
    if (!cp_fits(C, H, W, F, k, pad))
        return 0;
    emu_calls[1]++;
    const float *in = x ? x : x_relu;
    int ld = wide ? W : W - 2, OP = ((H - 2) / 2) * ((W - 2) / 2), slices = N < CPW_SLICES ? N : CPW_SLICES;
    cp_grads src = {dpy, fd ? fd->f : NULL, fd ? fd->mask : NULL, py, F, N, OP};
    float *part = sentinel(cpw_part_floats() * sizeof(float)), *xs = malloc(CPW_XS * sizeof *xs);
    float *gs = malloc(CPW_FG * CPW_LDG * sizeof *gs), acc[CPW_THREADS][10];
    int32_t *offs = malloc(CPW_FG * CPW_LDG * sizeof *offs);
    for (int f0 = 0; f0 < F; f0 += CPW_FG) {
        for (int c0 = 0; c0 < C; c0 += CPW_CC) {
            for (int s = 0; s < slices; s++) {
                size_t lo, hi;
                op_slice((size_t)N, slices, s, &lo, &hi);
                memset(acc, 0, sizeof acc);
                for (size_t n = lo; n < hi; n++) {
                    cpw_stage(0, 1, in, &src, arg, xs, gs, offs, N, H, W, OP, ld, (int)n, f0, c0);
                    for (unsigned j = 0; j < CPW_THREADS; j++)
                        cpw_acc(j, xs, gs, offs, H, W, OP, c0 == 0 && j % CPW_CC == 0, acc[j]);
                }
                for (unsigned j = 0; j < CPW_THREADS; j++)
                    cpw_part(j, acc[j], part, C, F, f0, c0, c0 == 0 && j % CPW_CC == 0, s);
            }
            for (unsigned e = 0; e < cpw_entries(c0); e++)
                cpw_finish(e, part, slices, dw, db, C, F, f0, c0);
        }
    }
    free(part), free(xs), free(gs), free(offs);
    if (!dx)
        return 1;
    float *ds = malloc(CPX_FC * CPX_PAD_MAX * sizeof *ds);
    cp_w4 *ws = malloc(CPX_FC * 9 * CPX_CG / 4 * sizeof *ws);
    int half = H * W / 2;
    float(*xacc)[2][CPX_CG] = malloc((size_t)half * sizeof *xacc);
    for (int n = 0; n < N; n++)
        for (int c0 = 0; c0 < C; c0 += CPX_CG) {
            memset(xacc, 0, (size_t)half * sizeof *xacc);
            cpx_clear(0, 1, ds, H - 2, W - 2);
            for (int f0 = 0; f0 < F; f0 += CPX_FC) {
                cpx_stage(0, 1, &src, arg, w, ds, ws, C, H - 2, W - 2, ld, n, c0, f0);
                for (int t = 0; t < half; t++)
                    cpx_acc((uint32_t)t, ds, ws, H, W, xacc[t]);
            }
            for (int t = 0; t < half; t++)
                cpx_out((uint32_t)t, xacc[t], x_relu, dx, N, H, W, n, c0);
        }
    free(ds), free(ws), free(xacc);
    return 1;
}

static float from_bits(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* One warp's mma.sync.m16n8k8 (TF32 in, fp32 sums): d += A B with a, b and d spread over the lanes as
 * conv_pool_tf32.h's header places them. The products of TF32 values are exact in fp32; the sums run in k order. */
static void mma_warp(float d[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    float A[16][8], B[8][8];
    for (int l = 0; l < 32; l++) {
        int g = l / 4, t = l % 4;
        A[g][t] = from_bits(a[l][0]), A[g + 8][t] = from_bits(a[l][1]);
        A[g][t + 4] = from_bits(a[l][2]), A[g + 8][t + 4] = from_bits(a[l][3]);
        B[t][g] = from_bits(b[l][0]), B[t + 4][g] = from_bits(b[l][1]);
    }
    for (int l = 0; l < 32; l++)
        for (int r = 0; r < 4; r++) {
            int row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
            for (int k = 0; k < 8; k++)
                d[l][r] = fmaf(A[row][k], B[k][col], d[l][r]);
        }
}

/* The warp's mmas of one step for every tile: acc [32 lanes][2][nt][4], a and b every lane's fragments; split:
 * 3xTF32 as the kernels' mma_step runs it (tf32_split, the small products first). */
static void warp_mmas(int nt, float *acc, uint32_t a[32][2][4], uint32_t b[32][CPT_NT][2], int split)
{
    uint32_t ab[32][4], as[32][4], bb[32][2], bs[32][2];
    float d[32][4];
    for (int mt = 0; mt < 2; mt++)
        for (int j = 0; j < nt; j++) {
            for (int l = 0; l < 32; l++) {
                for (int i = 0; i < 4; i++)
                    if (split)
                        tf32_split(a[l][mt][i], &ab[l][i], &as[l][i]);
                    else
                        ab[l][i] = a[l][mt][i];
                for (int i = 0; i < 2; i++)
                    if (split)
                        tf32_split(b[l][j][i], &bb[l][i], &bs[l][i]);
                    else
                        bb[l][i] = b[l][j][i];
                memcpy(d[l], acc + ((l * 2 + mt) * nt + j) * 4, sizeof d[l]);
            }
            if (split) {
                mma_warp(d, as, bb);
                mma_warp(d, ab, bs);
            }
            mma_warp(d, ab, bb);
            for (int l = 0; l < 32; l++)
                memcpy(acc + ((l * 2 + mt) * nt + j) * 4, d[l], sizeof d[l]);
        }
}

/* Every lane's fragments of mma step s: A by frag_a (cpt_frag_a, cpxt_frag_a), B by tf32_frag_b from ws, ldw apart. */
static void warp_frags(const uint32_t *xs, const uint32_t *ws, uint32_t ldw, int nt, int H, int W,
                       uint32_t rows[32][2][2], int s,
                       void (*frag_a)(const uint32_t *, unsigned, int, int, const uint32_t[2][2], int, uint32_t[2][4]),
                       uint32_t a[32][2][4], uint32_t b[32][CPT_NT][2])
{
    for (unsigned l = 0; l < 32; l++) {
        frag_a(xs, l, H, W, rows[l], s, a[l]);
        for (int j = 0; j < nt; j++)
            tf32_frag_b(ws, ldw, l, (uint32_t)s * 8, j, b[l][j]);
    }
}

enum { CPT_ACC = 32 * 2 * CPT_NT * 4, CPXT_ACC = 32 * 2 * CPXT_NT * 4 }; /* floats of a warp's accumulators */

/* src/gpu/cuda/conv_pool.cu's k_cpt_forward over its grid (N, F / CPT_F), split or not: every warp's lanes take their
 * fragments for each mma step, the warp's mmas emulated; or emu_forward where its tiles do not fit. */
static int emu_forward_mma(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                           const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int ld, int split)
{
    if (!cpt_fits(C, H, W, F, 3, 0))
        return emu_forward(x, w, pb, py, arg, fd, N, C, H, W, F, 3, 0, ld == W);
    int OP = ((H - 2) / 2) * ((W - 2) / 2);
    uint32_t *xs = malloc(CPT_CC * CP_HW_MAX * sizeof *xs), *ws = malloc(CPT_K * CPT_LDW * sizeof *ws);
    float *acc = malloc(CPT_WARPS * CPT_ACC * sizeof *acc);
    uint32_t pix[CPT_WARPS][32][2][2], a[32][2][4], b[32][CPT_NT][2];
    for (unsigned p = 0; p < CPT_WARPS; p++)
        for (unsigned l = 0; l < 32; l++)
            cpt_rows(p, l, W, OP, pix[p][l]);
    for (int n = 0; n < N; n++)
        for (int f0 = 0; f0 < F; f0 += CPT_F) {
            memset(acc, 0, CPT_WARPS * CPT_ACC * sizeof *acc);
            for (int c0 = 0; c0 < C; c0 += CPT_CC) {
                cpt_stage(0, 1, x, w, xs, ws, C, N, H, W, n, f0, c0, split);
                for (unsigned p = 0; p < CPT_WARPS; p++)
                    for (int s = 0; s < CPT_K / 8; s++) {
                        warp_frags(xs, ws, CPT_LDW, CPT_NT, H, W, pix[p], s, cpt_frag_a, a, b);
                        warp_mmas(CPT_NT, acc + p * CPT_ACC, a, b, split);
                    }
            }
            for (unsigned p = 0; p < CPT_WARPS; p++)
                for (unsigned l = 0; l < 32; l++)
                    cpt_out(p, l, (float(*)[CPT_NT][4])(acc + p * CPT_ACC + l * CPT_ACC / 32), pb, py, arg, fd, F, N,
                            H - 2, W - 2, ld, n, f0);
        }
    free(xs), free(ws), free(acc);
    return 1;
}

/* The weight and bias gradients as emu_backward's, then k_cpxt_xgrad over its grid (N, C / CPXT_C) as
 * emu_forward_mma runs k_cpt_forward; emu_backward where its tiles do not fit. */
static int emu_backward_mma(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg, const float *x,
                            const float *w, float *dw, float *db, float *dx, int N, int C, int H, int W, int F, int ld,
                            int split)
{
    if (!cpxt_fits(C, H, W, F, 3, 0))
        return emu_backward(dpy, fd, py, arg, NULL, x, w, dw, db, dx, N, C, H, W, F, 3, 0, ld == W);
    ck_assert(emu_backward(dpy, fd, py, arg, NULL, x, w, dw, db, NULL, N, C, H, W, F, 3, 0, ld == W));
    cp_grads src = {dpy, fd ? fd->f : NULL, fd ? fd->mask : NULL, py, F, N, ((H - 2) / 2) * ((W - 2) / 2)};
    uint32_t *ds = malloc(CPXT_FC * CPX_PAD_MAX * sizeof *ds), *ws = malloc(CPXT_K * CPXT_LDW * sizeof *ws);
    float *acc = malloc(CPXT_WARPS * CPXT_ACC * sizeof *acc);
    uint32_t at[CPXT_WARPS][32][2][2], a[32][2][4], b[32][CPT_NT][2];
    for (unsigned p = 0; p < CPXT_WARPS; p++)
        for (unsigned l = 0; l < 32; l++)
            cpxt_rows(p, l, H, W, at[p][l]);
    for (int n = 0; n < N; n++)
        for (int c0 = 0; c0 < C; c0 += CPXT_C) {
            memset(acc, 0, CPXT_WARPS * CPXT_ACC * sizeof *acc);
            cpxt_clear(0, 1, ds, H, W);
            for (int f0 = 0; f0 < F; f0 += CPXT_FC) {
                cpxt_stage(0, 1, &src, arg, w, ds, ws, C, H, W, ld, n, c0, f0, split);
                for (unsigned p = 0; p < CPXT_WARPS; p++)
                    for (int s = 0; s < CPXT_K / 8; s++) {
                        warp_frags(ds, ws, CPXT_LDW, CPXT_NT, H, W, at[p], s, cpxt_frag_a, a, b);
                        warp_mmas(CPXT_NT, acc + p * CPXT_ACC, a, b, split);
                    }
            }
            for (unsigned p = 0; p < CPXT_WARPS; p++)
                for (unsigned l = 0; l < 32; l++)
                    cpxt_out(p, l, (float(*)[CPXT_NT][4])(acc + p * CPXT_ACC + l * CPXT_ACC / 32), x, dx, N, H, W, n,
                             c0);
        }
    free(ds), free(ws), free(acc);
    return 1;
}

typedef struct {
    int C, N, H, W, F, wide;
} cp_shape;

static const cp_shape shapes[] = {
    {16, 3, 10, 8, 16, 1},   /* rows of 8 with 2 junk columns; one forward group, two input stages forward */
    {32, 2, 6, 12, 32, 0},   /* rows of 10 (not wide); several stages and groups each way */
    {32, 17, 26, 26, 64, 1}, /* net's conv2 at 17 samples: 16 slices, one of them two samples */
};

/* The input as conv1's ReLU leaves it: zeros and positive values. */
static float *relu_input(size_t n, uint64_t seed)
{
    float *x = random_floats(n, seed, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        x[i] = fmaxf(x[i], 0.0f);
    return x;
}

/* The largest |e - g| over n against the largest |e|: at most tol of it. */
static void close_floats(const char *what, const float *e, const float *g, size_t n, float tol)
{
    float big = 0.0f, err = 0.0f;
    for (size_t i = 0; i < n; i++)
        big = fmaxf(big, fabsf(e[i])), err = fmaxf(err, fabsf(e[i] - g[i]));
    ck_assert_msg(big > 0.0f && err <= tol * big, "%s off by %g of %g", what, (double)err, (double)big);
}

START_TEST(test_conv_pool)
{
    const cp_shape *s = &shapes[_i];
    int C = s->C, N = s->N, H = s->H, W = s->W, F = s->F, OH = H - 2, OW = W - 2, ld = s->wide ? W : OW;
    size_t nx = (size_t)C * N * H * W, nw = (size_t)F * C * 9, ny = (size_t)F * N * OH * ld,
           np = (size_t)F * N * (OH / 2) * (OW / 2);
    ck_assert(cp_fits(C, H, W, F, 3, 0));
    float *x = relu_input(nx, 300 + (uint64_t)_i), *w = random_floats(nw, 301, -0.2f, 0.2f);
    float *b = random_floats((size_t)F, 302, -0.3f, 0.3f), *dpy = random_floats(np, 303, -1.0f, 1.0f);
    float *col = malloc(conv_scratch(C, H, W, 3, 0, N, s->wide) * sizeof *col), *y = malloc(ny * sizeof *y);
    float *pye = sentinel(np * sizeof(float)), *pyg = sentinel(np * sizeof(float));
    int32_t *ae = sentinel(np * sizeof(int32_t)), *ag = sentinel(np * sizeof(int32_t));
    conv_pool_forward(&nn_cpu, x, w, b, y, pye, ae, NULL, N, C, H, W, F, 3, 0, col, N, s->wide);
    ck_assert(emu_forward(x, w, b, pyg, ag, NULL, N, C, H, W, F, 3, 0, s->wide));
    close_floats("pooled output", pye, pyg, np, 1e-5f);
    /* Argmaxes agree but where the window's two values are within rounding of each other. */
    for (size_t i = 0; i < np; i++) {
        size_t plane = i / ((size_t)(OH / 2) * (OW / 2));
        const float *yp = y + plane * OH * ld;
        ck_assert_msg(ag[i] >= 0 && ag[i] < OH * ld, "argmax %zu: %d", i, ag[i]);
        ck_assert_msg(ae[i] == ag[i] || fabsf(yp[ae[i]] - yp[ag[i]]) <= 1e-5f, "argmax %zu: %d, the CPU %d", i, ag[i],
                      ae[i]);
    }
    /* The backward from the CPU's pooled outputs and argmaxes. */
    float *dwe = calloc(nw, sizeof(float)), *dwg = calloc(nw, sizeof(float));
    float *dbe = calloc((size_t)F, sizeof(float)), *dbg = calloc((size_t)F, sizeof(float));
    float *dxe = sentinel(nx * sizeof(float)), *dxg = sentinel(nx * sizeof(float)), *dpy2 = malloc(np * sizeof *dpy2);
    memcpy(dpy2, dpy, np * sizeof *dpy2); /* the composition may overwrite it */
    pool_conv_backward(&nn_cpu, dpy2, NULL, pye, ae, x, x, w, y, dwe, dbe, dxe, N, C, H, W, F, 3, 0, col, N, s->wide);
    ck_assert(emu_backward(dpy, NULL, pye, ae, NULL, x, w, dwg, dbg, dxg, N, C, H, W, F, 3, 0, s->wide));
    close_floats("weight gradient", dwe, dwg, nw, 1e-5f);
    close_floats("bias gradient", dbe, dbg, (size_t)F, 1e-5f);
    close_floats("input gradient", dxe, dxg, nx, 1e-5f);
    for (size_t i = 0; i < nx; i++)
        ck_assert_msg(x[i] > 0.0f || dxg[i] == 0.0f, "input gradient %zu through a zero of the ReLU: %g", i,
                      (double)dxg[i]);
    free(x), free(w), free(b), free(dpy), free(col), free(y), free(pye), free(pyg), free(ae), free(ag);
    free(dwe), free(dwg), free(dbe), free(dbg), free(dxe), free(dxg), free(dpy2);
}
END_TEST

/* With dropout1 (MNIST_DDP_POOL=fused too): the forward's flattened output and mask, and the gradients from fc1's
 * flattened input gradient through that mask, against the composition's flatten_dropout_forward and
 * dropout_unflatten_backward. The masks agree bit for bit (the same draws). */
START_TEST(test_conv_pool_dropout)
{
    const cp_shape *s = &shapes[_i];
    int C = s->C, N = s->N, H = s->H, W = s->W, F = s->F, OH = H - 2, OW = W - 2, ld = s->wide ? W : OW;
    size_t nx = (size_t)C * N * H * W, nw = (size_t)F * C * 9, np = (size_t)F * N * (OH / 2) * (OW / 2);
    float *x = relu_input(nx, 310 + (uint64_t)_i), *w = random_floats(nw, 311, -0.2f, 0.2f);
    float *b = random_floats((size_t)F, 312, -0.3f, 0.3f), *df = random_floats(np, 313, -1.0f, 1.0f);
    float *col = malloc(conv_scratch(C, H, W, 3, 0, N, s->wide) * sizeof *col);
    float *y = malloc((size_t)F * N * OH * ld * sizeof *y), *py[2], *f[2], *mask[2], *dw[2], *db[2], *dx[2];
    int32_t *arg[2];
    uint64_t *ids = malloc((size_t)N * sizeof *ids);
    for (int i = 0; i < N; i++)
        ids[i] = 7000 + 13 * (uint64_t)i;
    for (int k = 0; k < 2; k++) {
        py[k] = sentinel(np * sizeof(float)), f[k] = sentinel(np * sizeof(float));
        mask[k] = sentinel(np * sizeof(float)), arg[k] = sentinel(np * sizeof(int32_t));
        dw[k] = calloc(nw, sizeof(float)), db[k] = calloc((size_t)F, sizeof(float));
        dx[k] = sentinel(nx * sizeof(float));
        nn_flat_dropout fd = {.f = f[k], .mask = mask[k], .ids = ids, .key = 0xd0d0, .layer = 0, .p = 0.25f};
        if (k == 0)
            conv_pool_forward(&nn_cpu, x, w, b, y, py[0], arg[0], &fd, N, C, H, W, F, 3, 0, col, N, s->wide);
        else
            ck_assert(emu_forward(x, w, b, py[1], arg[1], &fd, N, C, H, W, F, 3, 0, s->wide));
    }
    same_floats("dropout1 mask", mask[0], mask[1], np);
    close_floats("flattened output", f[0], f[1], np, 1e-5f);
    /* The backward from the CPU's pooled outputs, argmaxes and mask on both. */
    float *scratch = malloc(np * sizeof *scratch), *df0 = malloc(np * sizeof *df0);
    memcpy(df0, df, np * sizeof *df0); /* the composition may overwrite it */
    nn_flat_dropout fd0 = {.f = df0, .mask = mask[0]}, fd1 = {.f = df, .mask = mask[0]};
    pool_conv_backward(&nn_cpu, scratch, &fd0, py[0], arg[0], x, x, w, y, dw[0], db[0], dx[0], N, C, H, W, F, 3, 0, col,
                       N, s->wide);
    ck_assert(emu_backward(NULL, &fd1, py[0], arg[0], NULL, x, w, dw[1], db[1], dx[1], N, C, H, W, F, 3, 0, s->wide));
    close_floats("weight gradient through dropout1", dw[0], dw[1], nw, 1e-5f);
    close_floats("bias gradient through dropout1", db[0], db[1], (size_t)F, 1e-5f);
    close_floats("input gradient through dropout1", dx[0], dx[1], nx, 1e-5f);
    for (int k = 0; k < 2; k++)
        free(py[k]), free(f[k]), free(mask[k]), free(arg[k]), free(dw[k]), free(db[k]), free(dx[k]);
    free(x), free(w), free(b), free(df), free(col), free(y), free(ids), free(scratch), free(df0);
}
END_TEST

/* op_tf32 rounds to 10 mantissa bits, to nearest with ties away from zero (cvt.rna.tf32.f32). */
START_TEST(test_tf32_rounding)
{
    const float ulp = 0x1p-10f; /* TF32's spacing at 1 */
    const struct {
        float v, want;
    } cases[] = {
        {1.0f, 1.0f},
        {1.0f + ulp / 2, 1.0f + ulp},         /* a tie: away from zero */
        {-(1.0f + ulp / 2), -(1.0f + ulp)},   /* ... on both sides */
        {1.0f + ulp / 2 - 0x1p-23f, 1.0f},    /* below the tie: down */
        {1.0f + 3 * ulp / 2, 1.0f + 2 * ulp}, /* a tie above an odd value: away, not to even */
        {3.0f + ulp / 2, 3.0f},               /* at 2..4 the spacing doubles: a quarter of it rounds down */
        {3.0f + ulp, 3.0f + 2 * ulp},         /* and half of it is a tie */
        {0x1.fffffep0f, 2.0f},                /* the carry reaches the exponent */
        {0.1f, 0x1.998p-4f},                  /* 0x1.99999ap-4 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(from_bits(op_tf32(cases[i].v)) == cases[i].want, "op_tf32(%a) = %a, not %a", (double)cases[i].v,
                      (double)from_bits(op_tf32(cases[i].v)), (double)cases[i].want);
}
END_TEST

/* Shapes for the TF32 kernels: net's conv2 at 17 samples, and two groups of 64 output channels over 12 windows
 * (a warp half past them; the input gradient's third warp half past its 80 elements) in rows not wide. */
static const cp_shape tf32_shapes[] = {
    {32, 17, 26, 26, 64, 1},
    {32, 3, 10, 8, 128, 0},
};

/* The tensor-core kernels, TF32 against the CPU's composition of the same operands rounded to TF32 (the products
 * are exact there, so only the order of the sums differs: within 1e-5), 3xTF32 against the fp32 composition within
 * the same; the forward with dropout1: the pooled output, argmaxes but at ties, the flattened output and the mask
 * bit for bit; the input gradient from the composition's pooled outputs and argmaxes; both within TF32's precision
 * of the fp32 composition. */
START_TEST(test_conv_pool_tf32)
{
    const cp_shape *s = &tf32_shapes[_i / 2];
    int split = _i % 2; /* 0: TF32, its reference the composition of TF32 operands; 1: 3xTF32, the fp32 one */
    const char *mode = split ? "3xTF32" : "TF32";
    char what[96];
    int C = s->C, N = s->N, H = s->H, W = s->W, F = s->F, OH = H - 2, OW = W - 2, ld = s->wide ? W : OW;
    size_t nx = (size_t)C * N * H * W, nw = (size_t)F * C * 9, ny = (size_t)F * N * OH * ld,
           np = (size_t)F * N * (OH / 2) * (OW / 2);
    ck_assert(cpt_fits(C, H, W, F, 3, 0) && cpxt_fits(C, H, W, F, 3, 0));
    float *x = relu_input(nx, 320 + (uint64_t)_i / 2), *w = random_floats(nw, 321, -0.2f, 0.2f);
    float *b = random_floats((size_t)F, 322, -0.3f, 0.3f), *xr = malloc(nx * sizeof *xr), *wr = malloc(nw * sizeof *wr);
    for (size_t i = 0; i < nx; i++)
        xr[i] = split ? x[i] : from_bits(op_tf32(x[i]));
    for (size_t i = 0; i < nw; i++)
        wr[i] = split ? w[i] : from_bits(op_tf32(w[i]));
    float *col = malloc(conv_scratch(C, H, W, 3, 0, N, s->wide) * sizeof *col), *y = malloc(ny * sizeof *y);
    float *py[3], *f[3], *mask[3];
    int32_t *arg[3];
    uint64_t *ids = malloc((size_t)N * sizeof *ids);
    for (int i = 0; i < N; i++)
        ids[i] = 9000 + 11 * (uint64_t)i;
    for (int k = 2; k >= 0; k--) { /* k 0: the composition of TF32 values (its y kept), 1: the kernel, 2: fp32 */
        py[k] = sentinel(np * sizeof(float)), f[k] = sentinel(np * sizeof(float));
        mask[k] = sentinel(np * sizeof(float)), arg[k] = sentinel(np * sizeof(int32_t));
        nn_flat_dropout fd = {.f = f[k], .mask = mask[k], .ids = ids, .key = 0x7f32, .layer = 0, .p = 0.25f};
        if (k == 1)
            ck_assert(emu_forward_mma(x, w, b, py[1], arg[1], &fd, N, C, H, W, F, ld, split));
        else
            conv_pool_forward(&nn_cpu, k ? x : xr, k ? w : wr, b, y, py[k], arg[k], &fd, N, C, H, W, F, 3, 0, col, N,
                              s->wide);
    }
    close_floats(strcat(strcpy(what, mode), " pooled output"), py[0], py[1], np, 1e-5f);
    close_floats(strcat(strcpy(what, mode), " flattened output"), f[0], f[1], np, 1e-5f);
    same_floats("dropout1 mask", mask[0], mask[1], np);
    for (size_t i = 0; i < np; i++) {
        const float *yp = y + i / ((size_t)(OH / 2) * (OW / 2)) * OH * ld;
        ck_assert_msg(arg[1][i] >= 0 && arg[1][i] < OH * ld, "argmax %zu: %d", i, arg[1][i]);
        ck_assert_msg(arg[0][i] == arg[1][i] || fabsf(yp[arg[0][i]] - yp[arg[1][i]]) <= 1e-5f,
                      "argmax %zu: %d, the CPU %d", i, arg[1][i], arg[0][i]);
    }
    close_floats(strcat(strcpy(what, mode), " pooled output against fp32"), py[2], py[1], np, 2e-3f);
    /* The backward from the composition's pooled outputs and argmaxes: the input gradient against the
     * composition of the pooled gradient and weights as above, the weight and bias gradients (fp32) against fp32. */
    float *dpy = random_floats(np, 323, -1.0f, 1.0f), *dpyr = malloc(np * sizeof *dpyr), *d2 = malloc(np * sizeof *d2);
    for (size_t i = 0; i < np; i++)
        dpyr[i] = split ? dpy[i] : from_bits(op_tf32(dpy[i]));
    float *dw[3], *db[3], *dx[3];
    for (int k = 0; k < 3; k++) {
        dw[k] = calloc(nw, sizeof(float)), db[k] = calloc((size_t)F, sizeof(float)),
        dx[k] = sentinel(nx * sizeof(float));
        memcpy(d2, k ? dpy : dpyr, np * sizeof *d2); /* the composition may overwrite it */
        if (k == 1)
            ck_assert(emu_backward_mma(d2, NULL, py[0], arg[0], x, w, dw[1], db[1], dx[1], N, C, H, W, F, ld, split));
        else
            pool_conv_backward(&nn_cpu, d2, NULL, py[0], arg[0], x, x, k ? w : wr, y, dw[k], db[k], dx[k], N, C, H, W,
                               F, 3, 0, col, N, s->wide);
    }
    close_floats(strcat(strcpy(what, mode), " input gradient"), dx[0], dx[1], nx, 1e-5f);
    close_floats(strcat(strcpy(what, mode), " input gradient against fp32"), dx[2], dx[1], nx, 2e-3f);
    close_floats("weight gradient beside the input gradient's mma", dw[2], dw[1], nw, 1e-5f);
    close_floats("bias gradient beside the input gradient's mma", db[2], db[1], (size_t)F, 1e-5f);
    for (int k = 0; k < 3; k++)
        free(py[k]), free(f[k]), free(mask[k]), free(arg[k]), free(dw[k]), free(db[k]), free(dx[k]);
    free(x), free(w), free(b), free(xr), free(wr), free(col), free(y), free(ids), free(dpy), free(dpyr), free(d2);
}
END_TEST

/* Shapes the kernels leave to the composition. */
START_TEST(test_conv_pool_fits)
{
    ck_assert(cp_fits(32, 26, 26, 64, 3, 0));
    ck_assert(!cp_fits(32, 26, 26, 64, 5, 0));  /* another kernel size */
    ck_assert(!cp_fits(32, 26, 26, 64, 3, 1));  /* padding */
    ck_assert(!cp_fits(32, 27, 26, 64, 3, 0));  /* an odd output side: a row in no window */
    ck_assert(!cp_fits(12, 26, 26, 64, 3, 0));  /* channels in no whole stage */
    ck_assert(!cp_fits(32, 26, 26, 60, 3, 0));  /* output channels in no whole group */
    ck_assert(!cp_fits(48, 26, 26, 64, 3, 0));  /* more weight-gradient partials than its scratch holds */
    ck_assert(cp_fits(8, 26, 26, 256, 3, 0));   /* one weight-gradient block of input channels, 16 groups */
    ck_assert(!cp_fits(32, 26, 26, 272, 3, 0)); /* more output-channel groups than the weight gradient counts */
    ck_assert(!cp_fits(32, 28, 28, 64, 3, 0));  /* a plane over the forward's stage */
    ck_assert(cpt_fits(32, 26, 26, 64, 3, 0));
    ck_assert(cpt_fits(32, 26, 26, 32, 3, 0)); /* one TF32 block of output channels (CPT_F) */
    ck_assert(cp_fits(32, 26, 26, 48, 3, 0) && !cpt_fits(32, 26, 26, 48, 3, 0)); /* in no whole TF32 block */
    ck_assert(!cpt_fits(32, 28, 26, 64, 3, 0)); /* more windows than its warps own (13 x 12) */
    ck_assert(cpxt_fits(32, 26, 26, 64, 3, 0));
    ck_assert(cpxt_fits(16, 10, 8, 64, 3, 0)); /* one TF32 block of input channels (CPXT_C) */
    ck_assert(cp_fits(24, 10, 8, 64, 3, 0) && !cpxt_fits(24, 10, 8, 64, 3, 0)); /* channels in no whole TF32 block */
}
END_TEST

/* MNIST_DDP_POOL=fused's entries, which conv2's own backend entries take precedence over: never called. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
static void unused_pool_dropout(const float *x, const float *b, float *y, int32_t *arg, float *f, float *mask, int C,
                                int N, int H, int W, int ld, const uint64_t *ids, uint64_t key, int layer, float p)
{
    ck_abort_msg("the fused pool ran where conv2 direct pools");
}

static int unused_pool_sum(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx, float *db,
                           int C, int N, int H, int W, int ld)
{
    ck_abort_msg("the fused pool's backward ran where conv2 direct pools");
    return 0;
}
#pragma GCC diagnostic pop

/* The model's wiring: net trained with conv2 through these blocks (layers.c's conv_pool_forward and
 * pool_conv_backward calling the backend's, the forward's kept input NULL in the backward), alone, and on a
 * backend that also has MNIST_DDP_POOL=fused's entries (dropout1's flatten and unflatten then run on their own). */
START_TEST(test_conv_pool_training)
{
    nn_backend be = nn_cpu;
    be.conv_pool_forward = emu_forward;
    be.pool_conv_backward = emu_backward;
    memset(emu_calls, 0, sizeof emu_calls);
    same_training(&be, "conv2 direct");
    be.pool_flatten_dropout_forward = unused_pool_dropout;
    be.dropout_pool_backward_sum = unused_pool_sum;
    same_training(&be, "conv2 direct with the fused pool's entries");
    ck_assert_msg(emu_calls[0] == 2 && emu_calls[1] == 2, "conv2 direct ran %d forward, %d backward", emu_calls[0],
                  emu_calls[1]);
}
END_TEST

/* Every shape these blocks fit, with any number of samples. */
static int emu_covers(int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    (void)N, (void)wide;
    return cp_fits(C, H, W, F, k, pad);
}

/* A backend that covers net's conv2: the model holds neither conv2's output nor its columns (only conv1's,
 * smaller), and trains and evaluates as the CPU does without them. */
START_TEST(test_conv_pool_covered)
{
    enum { N = 9 };
    nn_backend be = nn_cpu;
    be.conv_pool_forward = emu_forward;
    be.pool_conv_backward = emu_backward;
    be.conv_pool_covers = emu_covers;
    model *m[2] = {model_create_on(&nn_cpu, MODEL_NET, N), model_create_on(&be, MODEL_NET, N)};
    int chunk = N < nn_cpu.chunk ? N : nn_cpu.chunk;
    size_t saved = conv_scratch(32, 26, 26, 3, 0, chunk, 1) - conv_scratch(1, 28, 28, 3, 0, chunk, 0) +
                   (size_t)64 * N * conv_plane(26, 26, 3, 0, 1);
    ck_assert_uint_eq(model_backend_bytes(m[0]) - model_backend_bytes(m[1]), saved * sizeof(float));
    float *x = malloc((size_t)N * 784 * sizeof *x);
    uint8_t labels[N];
    uint64_t ids[N];
    random_batch(81, N, x, labels, ids);
    long correct[2] = {0, 0};
    double loss[2];
    for (int k = 0; k < 2; k++)
        loss[k] = model_evaluate(m[k], x, labels, N, &correct[k]);
    ck_assert_msg(fabs(loss[0] - loss[1]) <= 1e-5 * fabs(loss[0]) && correct[0] == correct[1],
                  "evaluation: loss %.9g, %ld correct; the CPU %.9g, %ld", loss[1], correct[1], loss[0], correct[0]);
    model_free(m[0]), model_free(m[1]), free(x);
    same_training(&be, "conv2 direct, covered");
}
END_TEST

static int declines(const float *x, const float *w, const float *pb, float *py, int32_t *arg, const nn_flat_dropout *fd,
                    int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    (void)x, (void)w, (void)pb, (void)py, (void)arg, (void)fd, (void)N, (void)C, (void)H, (void)W, (void)F, (void)k,
        (void)pad, (void)wide;
    return 0;
}

/* A backend that covers a shape and then declines it: the model has no scratch to compose it on, and stops
 * (70) rather than write through NULL. */
START_TEST(test_conv_pool_covered_declined)
{
    nn_backend be = nn_cpu;
    be.conv_pool_forward = declines;
    be.pool_conv_backward = emu_backward;
    be.conv_pool_covers = emu_covers;
    same_training(&be, "declined");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv_pool");
    TCase *tc = tcase_create("conv_pool");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_conv_pool, 0, (int)(sizeof shapes / sizeof shapes[0]));
    tcase_add_loop_test(tc, test_conv_pool_dropout, 0, (int)(sizeof shapes / sizeof shapes[0]));
    tcase_add_test(tc, test_tf32_rounding);
    tcase_add_loop_test(tc, test_conv_pool_tf32, 0, 2 * (int)(sizeof tf32_shapes / sizeof tf32_shapes[0]));
    tcase_add_test(tc, test_conv_pool_fits);
    tcase_add_test(tc, test_conv_pool_training);
    tcase_add_test(tc, test_conv_pool_covered);
    tcase_add_exit_test(tc, test_conv_pool_covered_declined, EX_SOFTWARE);
    suite_add_tcase(s, tc);
    return check_run(s);
}
