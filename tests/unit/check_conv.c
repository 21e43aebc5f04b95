/* Convolution layers, the CPU's own (direct loops, im2col, wide rows), oneDNN's (direct, Winograd) and
 * wino43.h's forward beside oneDNN's Winograd backward:
 * forward values against the direct definition, backward against central finite differences, as in
 * check_layers (layer_testutil.h). */
#include "../check_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/conv_cpu.h"
#include "nn/cpu/conv_choice.h"
#include "nn/cpu/conv_onednn.h"
#include "nn/cpu/conv1_direct.h"
#include "nn/cpu/wino43.h"
#include "nn/layers.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/ops.h"
#include "base/rng.h"
#include "base/threads.h"
#include "kernel_testutil.h"
#include "layer_testutil.h"
#include "model_testutil.h"

/* ---------------------------------------------------------------- convolution */

typedef struct {
    const nn_backend *be;
    int N, C, H, W, F, k, pad, chunk, wide;
    float *x, *w, *b, *y, *r, *col;
} conv_ctx;

/* Output row length: OW, or W in the wide layout. */
static int conv_row(const conv_ctx *c) { return c->wide ? c->W : conv_out(c->W, c->k, c->pad); }

static size_t conv_out_count(const conv_ctx *c)
{
    return (size_t)c->F * c->N * conv_out(c->H, c->k, c->pad) * conv_row(c);
}

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    conv_forward(c->be, c->x, c->w, c->b, c->y, c->N, c->C, c->H, c->W, c->F, c->k, c->pad, c->col, c->chunk, c->wide);
    return dot(c->r, c->y, conv_out_count(c));
}

/* Forward against the direct definition, in double. */
static void check_conv_forward(const conv_ctx *c, double tol)
{
    int N = c->N, C = c->C, H = c->H, W = c->W, F = c->F, k = c->k, pad = c->pad;
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad), RW = conv_row(c);
    for (int f = 0; f < F; f++)
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = c->b[f];
                    for (int ch = 0; ch < C; ch++)
                        for (int kh = 0; kh < k; kh++)
                            for (int kw = 0; kw < k; kw++) {
                                int ih = oh + kh - pad, iw = ow + kw - pad;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    s += (double)c->w[((f * C + ch) * k + kh) * k + kw] *
                                         c->x[(((size_t)ch * N + n) * H + ih) * W + iw];
                            }
                    float y = c->y[(((size_t)f * N + n) * OH + oh) * RW + ow];
                    ck_assert_msg(fabs(y - s) <= tol * (1 + fabs(s)), "conv y[%d][%d][%d][%d] = %g, expected %g", f, n,
                                  oh, ow, (double)y, s);
                }
}

/* The element functions a GPU thread calls give the same col and input gradient as the CPU
 * loops: forward through op_im2col and a double-precision product, backward through w^T r
 * (double) and op_col2im. */
static void check_conv_elements(const conv_ctx *c, const float *dx, double tol)
{
    int N = c->N, C = c->C, H = c->H, W = c->W, F = c->F, k = c->k, pad = c->pad;
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad), RW = conv_row(c);
    size_t K = (size_t)C * k * k, P = (size_t)OH * OW, ld = (size_t)N * P;
    float *col = zeros(K * ld), *dcol = zeros(K * ld);
    for (int ch = 0; ch < C; ch++)
        for (int kh = 0; kh < k; kh++)
            for (int kw = 0; kw < k; kw++)
                for (int n = 0; n < N; n++)
                    for (int oh = 0; oh < OH; oh++)
                        for (int ow = 0; ow < OW; ow++)
                            col[((size_t)(ch * k + kh) * k + kw) * ld + n * P + (size_t)oh * OW + ow] =
                                op_im2col(c->x + ((size_t)ch * N + n) * H * W, H, W, pad, kh, kw, oh, ow);
    for (int f = 0; f < F; f++)
        for (size_t j = 0; j < ld; j++) {
            double s = c->b[f];
            for (size_t r = 0; r < K; r++)
                s += (double)c->w[f * K + r] * col[r * ld + j];
            float y = c->y[f * N * (size_t)OH * RW + j / OW * RW + j % OW]; /* j = (n * OH + oh) * OW + ow */
            ck_assert_msg(fabs(y - s) <= tol * (1 + fabs(s)), "op_im2col: y[%d][%zu]", f, j);
        }
    for (size_t r = 0; r < K; r++)
        for (size_t j = 0; j < ld; j++) {
            double s = 0;
            for (int f = 0; f < F; f++)
                s += (double)c->w[f * K + r] * c->r[f * N * (size_t)OH * RW + j / OW * RW + j % OW];
            dcol[r * ld + j] = (float)s;
        }
    for (int ch = 0; ch < C; ch++)
        for (int n = 0; n < N; n++)
            for (int ih = 0; ih < H; ih++)
                for (int iw = 0; iw < W; iw++) {
                    float g = op_col2im(dcol + (size_t)ch * k * k * ld + n * P, ld, k, pad, OH, OW, ih, iw);
                    float got = dx[(((size_t)ch * N + n) * H + ih) * W + iw];
                    ck_assert_msg(fabsf(got - g) <= tol * (1 + fabsf(g)), "op_col2im: dx[%d][%d][%d][%d] %g vs %g", ch,
                                  n, ih, iw, (double)got, (double)g);
                }
    free(col), free(dcol);
}

/* Without dx: the same parameter gradients, added to what is there; the same bias gradient bit for bit,
 * except where wino43's conv1 sums the gradients directly without dx (conv1_direct.h): there up to the
 * rounding of another order over N x 676 products of either sign (1.4e-5 apart on a |dw| of 0.3 seen with
 * OpenBLAS's Haswell kernels on the GEMM side). */
static void check_conv_without_dx(const conv_ctx *c, const float *dw, const float *db)
{
    int N = c->N, C = c->C, H = c->H, W = c->W, F = c->F, k = c->k, pad = c->pad, chunk = c->chunk, wide = c->wide;
    size_t nw = (size_t)F * C * k * k;
    int direct1 = c->be == nn_cpu_onednn(WINO_OWN) && C == 1 && !wide && conv1_direct_usable(H, W, F, k, pad);
    float *dw2 = zeros(nw), *db2 = zeros(F);
    for (size_t i = 0; i < nw; i++)
        dw2[i] = 1.0f;
    conv_backward(c->be, c->x, c->w, c->r, dw2, db2, NULL, N, C, H, W, F, k, pad, c->col, chunk, wide);
    for (size_t i = 0; i < nw; i++)
        ck_assert_float_eq_tol(dw2[i] - 1.0f, dw[i], (direct1 ? 1e-4f : 1e-5f) * (1.0f + fabsf(dw[i])));
    if (direct1)
        for (int f = 0; f < F; f++)
            ck_assert_float_eq_tol(db2[f], db[f], 1e-5f * (1.0f + fabsf(db[f])));
    else
        ck_assert_mem_eq(db, db2, (size_t)F * sizeof *db);
    free(dw2), free(db2);
}

/* Forward against the direct definition (double); backward by finite differences. Inputs and
 * weights in [-1, 1]: L is linear in each of them, so central differences are exact up to
 * rounding: changing one value changes at most F k k outputs of size <= C k k (Winograd: every
 * output of the tiles it is in), whose float rounding (~1e-6 each) over the 2h = 0.5 step gives
 * numeric errors ~1e-4 on gradients ~1-10. tol bounds the error of outputs s relative to 1 + |s|. */
static void conv_case_on(const nn_backend *be, int N, int C, int H, int W, int F, int k, int pad, int chunk, int wide,
                         uint64_t seed, double tol)
{
    conv_ctx c = {be, N, C, H, W, F, k, pad, chunk, wide, NULL, NULL, NULL, NULL, NULL, NULL};
    int OW = conv_out(W, k, pad), RW = conv_row(&c);
    size_t nx = (size_t)C * N * H * W, nw = (size_t)F * C * k * k, ny = conv_out_count(&c);
    c.x = random_floats(nx, rng_key(seed, 1), -1, 1);
    c.w = random_floats(nw, rng_key(seed, 2), -1, 1);
    c.b = random_floats(F, rng_key(seed, 3), -1, 1);
    c.r = random_floats(ny, rng_key(seed, 4), -1, 1);
    for (size_t i = 0; i < ny; i++) /* the output gradient is zero in junk columns */
        if ((int)(i % (size_t)RW) >= OW)
            c.r[i] = 0.0f;
    c.y = zeros(ny);
    c.col = zeros(conv_scratch(C, H, W, k, pad, chunk, wide));
    conv_loss(&c);
    check_conv_forward(&c, tol);
    float *dw = zeros(nw), *db = zeros(F), *dx = zeros(nx);
    conv_backward(be, c.x, c.w, c.r, dw, db, dx, N, C, H, W, F, k, pad, c.col, chunk, wide);
    check_conv_elements(&c, dx, tol);
    fd_check("conv dx", conv_loss, &c, c.x, dx, nx, 40, 0.25f, 1e-4, 1e-3, rng_key(seed, 5));
    fd_check("conv dw", conv_loss, &c, c.w, dw, nw, 40, 0.25f, 1e-4, 1e-3, rng_key(seed, 6));
    fd_check("conv db", conv_loss, &c, c.b, db, F, 0, 0.25f, 1e-4, 1e-3, 0);
    check_conv_without_dx(&c, dw, db);
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y), free(c.col), free(dw), free(db), free(dx);
}

static void conv_case(int N, int C, int H, int W, int F, int k, int pad, int chunk, int wide, uint64_t seed)
{
    conv_case_on(&nn_cpu, N, C, H, W, F, k, pad, chunk, wide, seed, 1e-5);
}

/* One thread: with more, the CPU backend runs each sample alone (conv_cpu.h) and the chunks below never form. */
START_TEST(test_conv_nopad)
{
    omp_set_num_threads(1);
    conv_case(3, 2, 7, 6, 4, 3, 0, 2, 0, 11); /* chunks of 2 then 1; non-square planes */
    conv_case(3, 2, 7, 6, 4, 3, 0, 2, 1, 14); /* the same in the wide layout */
    conv_case(2, 3, 6, 8, 5, 5, 0, 1, 1, 15);
}
END_TEST

START_TEST(test_conv_pad)
{
    omp_set_num_threads(1);
    conv_case(2, 3, 6, 6, 2, 5, 2, 1, 0, 12);
    conv_case(3, 1, 5, 5, 3, 3, 1, 8, 0, 13); /* one chunk holds the whole batch */
}
END_TEST

/* With more than one thread the CPU backend shares small layers' samples among the threads (conv_cpu.h):
 * the same definitions and differences on 2 and 3 threads for both models' conv1 (5 samples: uneven
 * shares) and a wide one; the forward bit for bit as on one thread; a backward with x NULL after its
 * forward reads the kept input. */
START_TEST(test_conv_threads)
{
    enum { N = 5, S = 28, F = 32, OS = S - 2 };
    omp_set_num_threads(2 + _i);
    if (omp_get_max_threads() < 2) {
        printf("check_conv: built without OpenMP: one thread, nothing to share\n");
        return;
    }
    conv_case_on(&nn_cpu, N, 1, S, S, F, 3, 0, 1, 0, 41, 1e-5);
    conv_case_on(&nn_cpu, 3, 1, S, S, 16, 5, 2, 1, 0, 42, 1e-5);
    conv_case_on(&nn_cpu, 3, 2, 7, 6, 4, 3, 0, 1, 1, 43, 1e-5);
    size_t ny = (size_t)F * N * OS * OS, nw = (size_t)F * 9;
    float *x = random_floats((size_t)N * S * S, 44, -1, 1), *w = random_floats(nw, 45, -1, 1);
    float *dy = random_floats(ny, 46, -1, 1), *y1 = zeros(ny), *yt = zeros(ny), *col = zeros(9 * OS * OS);
    float *dw = zeros(nw), *dwk = zeros(nw), *db = zeros(F), *dbk = zeros(F);
    ck_assert_int_eq(cpu_conv_forward(&nn_cpu, x, w, NULL, yt, N, 1, S, S, F, 3, 0, 0), 1);
    cpu_conv_backward(&nn_cpu, x, w, dy, dw, db, NULL, N, 1, S, S, F, 3, 0, 0);
    ck_assert_int_eq(conv_forward(&nn_cpu, x, w, NULL, yt, N, 1, S, S, F, 3, 0, col, 1, 0), 1);
    conv_backward(&nn_cpu, NULL, w, dy, dwk, dbk, NULL, N, 1, S, S, F, 3, 0, col, 1, 0);
    same_floats("threaded conv: dw from the kept input", dw, dwk, nw);
    same_floats("threaded conv: db from the kept input", db, dbk, F);
    /* An input given to the backward wins over the kept one: dw of x2, as a backward right after x2's forward. */
    float *x2 = random_floats((size_t)N * S * S, 47, -1, 1), *dw2 = zeros(nw), *dwg = zeros(nw);
    ck_assert_int_eq(cpu_conv_forward(&nn_cpu, x2, w, NULL, yt, N, 1, S, S, F, 3, 0, 0), 1);
    cpu_conv_backward(&nn_cpu, NULL, w, dy, dw2, db, NULL, N, 1, S, S, F, 3, 0, 0);
    ck_assert_int_eq(cpu_conv_forward(&nn_cpu, x, w, NULL, yt, N, 1, S, S, F, 3, 0, 0), 1);
    cpu_conv_backward(&nn_cpu, x2, w, dy, dwg, db, NULL, N, 1, S, S, F, 3, 0, 0);
    same_floats("threaded conv: dw from the input given, not the kept one", dw2, dwg, nw);
    free(x2), free(dw2), free(dwg);
    omp_set_num_threads(1);
    ck_assert_int_eq(conv_forward(&nn_cpu, x, w, NULL, y1, N, 1, S, S, F, 3, 0, col, 1, 0), 0);
    same_floats("threaded conv: y as on one thread", y1, yt, ny);
    free(x), free(w), free(dy), free(y1), free(yt), free(col), free(dw), free(dwk), free(db), free(dbk);
}
END_TEST

/* oneDNN's convolutions (--conv onednn, winograd) and wino43's forward (--conv wino43) against the same
 * definitions and differences, on the shapes of both models (batch sizes a run meets: full, remainder, one)
 * and odd ones; one-channel inputs take im2col (scratch for one sample). wino43 takes net's conv2 and the
 * three shapes after it: the largest channel and filter counts with fewer tiles than one block, a plane whose
 * tiles end in a partial block, and one vector of channels whose input gradient's tiles go in blocks of seven. */
START_TEST(test_conv_onednn)
{
    const nn_backend *be = nn_cpu_onednn(_i);
    if (!be) {
        printf("check_layers: built without oneDNN: its convolution cases do not apply\n");
        return;
    }
    /* Winograd's transforms add rounding: up to 1.7e-5 measured on conv2's sums of 288 products (direct:
     * under 1e-5), so its bound is ten times the direct one. */
    double tol = _i ? 1e-4 : 1e-5;
    conv_case_on(be, 3, 1, 28, 28, 32, 3, 0, 1, 0, 21, tol);   /* net's conv1 */
    conv_case_on(be, 2, 32, 26, 26, 64, 3, 0, 1, 1, 22, tol);  /* net's conv2, wide output */
    conv_case_on(be, 1, 32, 26, 26, 64, 3, 0, 1, 1, 23, tol);  /* the same plan key but one sample */
    conv_case_on(be, 2, 64, 10, 10, 128, 3, 0, 1, 0, 28, tol); /* 4 tiles of 4 x 4 per plane */
    conv_case_on(be, 3, 16, 14, 14, 64, 3, 0, 1, 1, 29, tol);  /* 9 tiles: a block of 6, then 3 */
    conv_case_on(be, 2, 16, 26, 26, 16, 3, 0, 1, 0, 30, tol);  /* input gradient: 49 tiles in sevens, 16 outputs */
    conv_case_on(be, 2, 1, 28, 28, 16, 5, 2, 1, 0, 24, tol);   /* convnet's conv1 */
    conv_case_on(be, 3, 16, 14, 14, 32, 5, 2, 1, 0, 25, tol);  /* convnet's conv2 */
    conv_case_on(be, 3, 2, 7, 6, 4, 3, 0, 1, 1, 26, tol);      /* non-square planes, wide */
    conv_case_on(be, 2, 3, 6, 6, 2, 5, 2, 1, 0, 27, tol);
}
END_TEST

/* Winograd really runs where the CPU has it: its rounding differs from the direct convolution's, and
 * wino43's (forward and both gradients) from oneDNN's Winograd (other points, sums in another order) or,
 * where oneDNN has none (AVX2: ONEDNN_MAX_CPU_ISA=AVX2, a CPU without AVX-512), from the direct one's; auto
 * picks wino43. */
START_TEST(test_conv_winograd_runs)
{
    int theirs = nn_cpu_onednn(WINO_ONEDNN) && onednn_has_winograd();
    if (!nn_cpu_onednn(WINO_OWN) || (!theirs && !wino43_has_cpu())) {
        printf("check_conv: no oneDNN, or no Winograd of its or ours on this CPU: nothing to tell apart\n");
        return;
    }
    ck_assert_msg(nn_cpu_conv("auto") == nn_cpu_onednn(WINO_OWN), "--conv auto is not wino43 in a oneDNN build");
    enum { N = 2, C = 32, S = 26, F = 64, OS = S - 2, ALGS = 3 };
    int other = theirs ? WINO_ONEDNN : WINO_NONE; /* what wino43's must differ from */
    size_t ny = (size_t)F * N * OS * OS;
    float *x = random_floats((size_t)C * N * S * S, 31, -1, 1), *w = random_floats((size_t)F * C * 9, 32, -1, 1);
    float *y[ALGS];
    for (int a = 0; a < ALGS; a++) {
        y[a] = zeros(ny);
        conv_forward(nn_cpu_onednn(a), x, w, NULL, y[a], N, C, S, S, F, 3, 0, NULL, 1, 0);
    }
    if (theirs)
        ck_assert_msg(memcmp(y[WINO_NONE], y[WINO_ONEDNN], ny * sizeof(float)) != 0,
                      "--conv winograd gave the direct convolution's output bit for bit: Winograd did not run");
    /* The gradients likewise (wino43's own where the output gradient is in oneDNN's blocks). */
    size_t nx = (size_t)C * N * S * S, nw = (size_t)F * C * 9;
    float *dy = random_floats(ny, 33, -1, 1), *dx[ALGS], *dw[ALGS], *db = zeros(F);
    for (int a = 0; a < ALGS; a++) {
        dx[a] = zeros(nx);
        dw[a] = zeros(nw);
        conv_backward(nn_cpu_onednn(a), x, w, dy, dw[a], db, dx[a], N, C, S, S, F, 3, 0, NULL, 1, 0);
    }
    if (wino43_has_cpu()) {
        printf("check_conv: wino43's %s kernels against %s\n", wino43_isa(),
               theirs ? "oneDNN's Winograd" : "the direct convolution");
        ck_assert_msg(memcmp(y[other], y[WINO_OWN], ny * sizeof(float)) != 0,
                      "--conv wino43 gave oneDNN's output bit for bit: its own forward did not run");
        ck_assert_msg(memcmp(dx[other], dx[WINO_OWN], nx * sizeof(float)) != 0,
                      "--conv wino43 gave oneDNN's input gradient bit for bit: its own did not run");
        ck_assert_msg(memcmp(dw[other], dw[WINO_OWN], nw * sizeof(float)) != 0,
                      "--conv wino43 gave oneDNN's weight gradient bit for bit: its own did not run");
    } else {
        printf("check_conv: no AVX-512 or AVX2 here: wino43's convolutions are oneDNN's\n");
    }
    for (int a = 0; a < ALGS; a++)
        free(y[a]), free(dx[a]), free(dw[a]);
    free(x), free(w), free(dy), free(db);
}
END_TEST

/* One conv + pool forward and backward (net's conv2: wide rows, bias after the pool) through be, the
 * backward right after the forward as the model runs it: x NULL when the forward kept it; dx through x's
 * ReLU unless x_relu is NULL. */
typedef struct {
    float *y, *py, *dpy, *dw, *db, *dx;
    int32_t *arg;
} conv_pool_run;

static conv_pool_run conv_pool_through(const nn_backend *be, const float *x, const float *w, const float *pb,
                                       const float *dpy, const float *x_relu, int N, int C, int H, int W, int F)
{
    int OH = H - 2, OW = W - 2;
    size_t ny = (size_t)F * N * OH * W, np = (size_t)F * N * (OH / 2) * (OW / 2), nx = (size_t)C * N * H * W;
    conv_pool_run r = {sentinel(ny * sizeof(float)),
                       sentinel(np * sizeof(float)),
                       malloc(np * sizeof(float)),
                       zeros((size_t)F * C * 9),
                       zeros((size_t)F),
                       sentinel(nx * sizeof(float)),
                       sentinel(np * sizeof(int32_t))};
    memcpy(r.dpy, dpy, np * sizeof(float));
    int kept = conv_pool_forward(be, x, w, pb, r.y, r.py, r.arg, NULL, N, C, H, W, F, 3, 0, NULL, 1, 1);
    pool_conv_backward(be, r.dpy, NULL, r.py, r.arg, kept ? NULL : x, x_relu, w, r.y, r.dw, r.db, r.dx, N, C, H, W, F,
                       3, 0, NULL, 1, 1);
    return r;
}

/* oneDNN's fused conv + pool (its conv_pool_forward, pool_conv_backward: the pool reads the primitive's
 * blocked output, its backward writes the primitive's blocked gradient and reads its blocked dx through the
 * ReLU) against layers.c's composition of the same convolutions with the CPU's pool and ReLU, bit for bit:
 * pooled values, argmaxes, dw, db, dx. */
START_TEST(test_conv_pool_onednn)
{
    static const char *const algs[] = {"direct", "winograd", "wino43"};
    const nn_backend *be = nn_cpu_onednn(_i);
    if (!be) {
        printf("check_conv: built without oneDNN: its fused conv + pool does not apply\n");
        return;
    }
    nn_backend composed = *be;
    composed.conv_pool_forward = NULL;
    composed.pool_conv_backward = NULL;
    enum { C = 32, F = 64 };
    /* A batch with and without the ReLU, one sample (oneDNN's plain layouts for it differ), five samples on
     * three threads (wino43's parts: a plan's count of them is fixed when the plan is made), and planes wider
     * than high and higher than wide. */
    static const struct {
        int N, relu, threads, H, W;
    } cases[] = {{3, 1, 1, 26, 26}, {3, 0, 1, 26, 26}, {1, 1, 1, 26, 26},
                 {5, 1, 3, 26, 26}, {2, 1, 1, 18, 26}, {2, 1, 1, 26, 18}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int N = cases[t].N, H = cases[t].H, W = cases[t].W, OH = H - 2;
        omp_set_num_threads(cases[t].threads);
        size_t np = (size_t)F * N * (OH / 2) * ((W - 2) / 2), nx = (size_t)C * N * H * W;
        float *x = random_floats(nx, rng_key(90 + t, (uint64_t)N), -1, 1);
        float *w = random_floats((size_t)F * C * 9, 91, -1, 1), *pb = random_floats(F, 92, -1, 1);
        float *dpy = random_floats(np, rng_key(93, (uint64_t)N), -1, 1);
        const float *x_relu = cases[t].relu ? x : NULL;
        conv_pool_run f = conv_pool_through(be, x, w, pb, dpy, x_relu, N, C, H, W, F);
        conv_pool_run c = conv_pool_through(&composed, x, w, pb, dpy, x_relu, N, C, H, W, F);
        /* Where oneDNN has Winograd (AVX-512) it takes nChw16c, which the fused pool reads: y stays unwritten;
         * wino43 on AVX2 makes its primitives for nChw16c too. */
        int fused = is_sentinel(f.y, (size_t)F * N * OH * W * sizeof(float));
        ck_assert_msg(fused || !(onednn_has_winograd() || (_i == WINO_OWN && wino43_has_cpu())),
                      "oneDNN (%s, N %d): the fused pool did not run on a CPU with Winograd", algs[_i], N);
        if (!fused)
            printf("check_conv: oneDNN (%s, N %d) chose a layout nchw16c.h does not read: the composition ran\n",
                   algs[_i], N);
        same_floats("conv + pool: pooled", c.py, f.py, np);
        same("conv + pool: argmax", c.arg, f.arg, np, sizeof(int32_t), 0, np);
        same_floats("conv + pool: dw", c.dw, f.dw, (size_t)F * C * 9);
        same_floats("conv + pool: db", c.db, f.db, F);
        same_floats("conv + pool: dx", c.dx, f.dx, nx);
        conv_pool_run *runs[] = {&f, &c};
        for (int i = 0; i < 2; i++)
            free(runs[i]->y), free(runs[i]->py), free(runs[i]->dpy), free(runs[i]->dw), free(runs[i]->db),
                free(runs[i]->dx), free(runs[i]->arg);
        free(x), free(w), free(pb), free(dpy);
    }
    omp_set_num_threads(1);
}
END_TEST

/* wino43's conv1 (conv1_direct.h): forward with bias and ReLU against the definition in double, and its
 * gradients (no input gradient: the first layer's) against the im2col path's, on net's conv1, a plane whose
 * rows fit one vector, one whose second vector is nearly full and one whose two are full (the widest it
 * takes: a row one pixel wider is refused), on one thread and three. */
START_TEST(test_conv1_direct)
{
    const nn_backend *be = nn_cpu_onednn(WINO_OWN);
    if (!be || !conv1_direct_usable(28, 28, 32, 3, 0)) {
        printf("check_conv: no oneDNN or neither AVX-512 nor AVX2 here: wino43's conv1 does not apply\n");
        return;
    }
    static const struct {
        int N, S, F, threads;
    } cases[] = {{3, 28, 32, 1}, {2, 12, 8, 1}, {5, 33, 4, 3}, {2, 34, 4, 1}, {4, 28, 32, 3}};
    ck_assert_int_eq(conv1_direct_usable(34, 34, 4, 3, 0), 1);
    ck_assert_int_eq(conv1_direct_usable(34, 35, 4, 3, 0), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int N = cases[i].N, S = cases[i].S, F = cases[i].F, OS = S - 2;
        omp_set_num_threads(cases[i].threads);
        size_t nx = (size_t)N * S * S, ny = (size_t)F * N * OS * OS;
        float *x = random_floats(nx, rng_key(50, i), -1, 1), *w = random_floats((size_t)F * 9, rng_key(51, i), -1, 1);
        float *b = random_floats(F, rng_key(52, i), -1, 1), *dy = random_floats(ny, rng_key(53, i), -1, 1);
        float *y = sentinel(ny * sizeof(float)), *dw = zeros((size_t)F * 9), *db = zeros(F);
        float *dw2 = zeros((size_t)F * 9), *db2 = zeros(F), *dx = zeros(nx);
        ck_assert_int_eq(be->conv1_bias_relu_forward(x, w, b, y, N, S, S, F, 3, 0), 1);
        for (int f = 0; f < F; f++)
            for (int n = 0; n < N; n++)
                for (int p = 0; p < OS * OS; p++) {
                    double s = b[f];
                    for (int t = 0; t < 9; t++)
                        s += (double)w[f * 9 + t] * x[((size_t)n * S + p / OS + t / 3) * S + p % OS + t % 3];
                    s = s > 0 ? s : 0;
                    float got = y[((size_t)f * N + n) * OS * OS + p];
                    ck_assert_msg(fabs(got - s) <= 1e-5 * (1 + fabs(s)), "conv1 direct y[%d][%d][%d] = %g, expected %g",
                                  f, n, p, (double)got, s);
                }
        /* 1 from the backend's own entry on one thread too, where nn_cpu composes: the direct sums ran */
        ck_assert_int_eq(be->conv_backward(be, x, w, dy, dw, db, NULL, N, 1, S, S, F, 3, 0, 0), 1);
        float *col = zeros(conv_scratch(1, S, S, 3, 0, N, 0));
        conv_backward(&nn_cpu, x, w, dy, dw2, db2, dx, N, 1, S, S, F, 3, 0, col, N, 0);
        for (int j = 0; j < F * 9; j++)
            ck_assert_float_eq_tol(dw[j], dw2[j], 1e-5f * (1.0f + fabsf(dw2[j])));
        for (int f = 0; f < F; f++)
            ck_assert_float_eq_tol(db[f], db2[f], 1e-5f * (1.0f + fabsf(db2[f])));
        free(x), free(w), free(b), free(dy), free(y), free(dw), free(db), free(dw2), free(db2), free(dx), free(col);
    }
    omp_set_num_threads(1);
}
END_TEST

static float *ones(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = 1.0f;
    return p;
}

/* The stack's conv1 output (blocks of 16 channels, channel innermost) holds the composition's (C, N, H, W) bits. */
static void stack_same_h1(const nn_conv_stack *s, const float *h1)
{
    int N = s->N, C1 = s->F1, P = (s->H - 2) * (s->W - 2);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C1; c++)
            for (int p = 0; p < P; p++) {
                float e = h1[((size_t)c * N + n) * P + p];
                float g = s->h1[(((size_t)n * C1 / 16 + c / 16) * P + p) * 16 + c % 16];
                ck_assert_msg(memcmp(&e, &g, sizeof e) == 0, "stack: h1[%d][%d][%d] = %g, expected %g", c, n, p,
                              (double)g, (double)e);
            }
}

/* conv1's gradients (added to ones) against sums in double of the composition's dh1 (its values are the
 * stack's): two orders of float sums over N x 676 products of either sign differ by up to ~1e-5 of their
 * magnitudes. */
static void stack_conv1_grads(const nn_conv_stack *s, const float *dh1)
{
    int N = s->N, C1 = s->F1, H = s->H, W = s->W, W1 = W - 2, P = (H - 2) * W1;
    for (int f = 0; f < C1; f++)
        for (int t = 0; t <= 9; t++) {
            double ref = 0, mag = 0;
            for (int n = 0; n < N; n++)
                for (int p = 0; p < P; p++) {
                    double g = dh1[((size_t)f * N + n) * P + p];
                    double v = t < 9 ? g * s->x[((size_t)n * H + p / W1 + t / 3) * W + p % W1 + t % 3] : g;
                    ref += v, mag += fabs(v);
                }
            float got = (t < 9 ? s->dw1[f * 9 + t] : s->db1[f]) - 1.0f;
            ck_assert_msg(fabs(got - ref) <= 1e-5 * mag + 1e-6, "stack: conv1's gradient [%d][%d] = %g, expected %g", f,
                          t, (double)got, ref);
        }
}

/* One case of test_conv_stack: N images of H x W on `threads` threads, the inputs drawn with key i. */
static void stack_case(const nn_backend *be, int N, int H, int W, int threads, int i)
{
    enum { C1 = 32, C2 = 64 };
    int H1 = H - 2, W1 = W - 2;
    omp_set_num_threads(threads);
    size_t nx = (size_t)N * H * W, nh = (size_t)C1 * N * H1 * W1, np = (size_t)C2 * N * ((H1 - 2) / 2) * ((W1 - 2) / 2);
    size_t nw1 = (size_t)C1 * 9, nw2 = (size_t)C2 * C1 * 9;
    float *x = random_floats(nx, rng_key(60, i), 0, 1), *w1 = random_floats(nw1, rng_key(61, i), -1, 1);
    float *b1 = random_floats(C1, rng_key(62, i), -1, 1), *w2 = random_floats(nw2, rng_key(63, i), -0.2f, 0.2f);
    float *b2 = random_floats(C2, rng_key(64, i), -1, 1), *dpy = random_floats(np, rng_key(65, i), -1, 1);
    nn_conv_stack s = {.x = x,
                       .w1 = w1,
                       .b1 = b1,
                       .h1 = sentinel(nh * sizeof(float)),
                       .w2 = w2,
                       .b2 = b2,
                       .py = sentinel(np * sizeof(float)),
                       .arg = sentinel(np * sizeof(int32_t)),
                       .dpy = dpy,
                       .dw1 = ones(nw1),
                       .db1 = ones(C1),
                       .dw2 = ones(nw2),
                       .db2 = ones(C2),
                       .N = N,
                       .H = H,
                       .W = W,
                       .F1 = C1,
                       .F2 = C2,
                       .k = 3,
                       .ld2 = W1};
    ck_assert_msg(be->conv_stack_forward(&s) == 1, "stack: %d x %d refused", H, W);
    ck_assert_int_eq(be->conv_stack_backward(&s), 1);
    /* The composition, as networks.c runs it without the stack (conv1's backward aside). */
    float *h1 = malloc(nh * sizeof(float)), *y = malloc((size_t)C2 * N * (H1 - 2) * W1 * sizeof(float));
    float *py = malloc(np * sizeof(float)), *dh1 = malloc(nh * sizeof(float));
    float *dw2 = ones(nw2), *db2 = ones(C2), *col = zeros(conv_scratch(1, H, W, 3, 0, N, 0));
    int32_t *arg = malloc(np * sizeof(int32_t));
    conv_bias_relu_forward(be, x, w1, b1, h1, N, 1, H, W, C1, 3, 0, col, N, 0);
    int kept = conv_pool_forward(be, h1, w2, b2, y, py, arg, NULL, N, C1, H1, W1, C2, 3, 0, NULL, 1, 1);
    pool_conv_backward(be, dpy, NULL, py, arg, kept ? NULL : h1, h1, w2, y, dw2, db2, dh1, N, C1, H1, W1, C2, 3, 0,
                       NULL, 1, 1);
    same_floats("stack: pooled", py, s.py, np);
    same("stack: argmax", arg, s.arg, np, sizeof(int32_t), 0, np);
    stack_same_h1(&s, h1);
    same_floats("stack: dw2", dw2, s.dw2, nw2);
    same_floats("stack: db2", db2, s.db2, C2);
    stack_conv1_grads(&s, dh1);
    float *bufs[] = {x, w1, b1, w2, b2, dpy, s.h1, s.py, s.dw1, s.db1, s.dw2, s.db2, h1, y, py, dh1, dw2, db2, col};
    for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++)
        free(bufs[j]);
    free(s.arg), free(arg);
}

/* wino43's convolution stack (conv_stack.h, wino43_stack.h) against the composition of the same backend's layers
 * (conv1's direct forward, conv2 + pool, their backward passes): pooled values, argmaxes and conv2's gradients
 * bit for bit, conv1's output the same bits in its blocks, conv1's gradients (summed in another order) against
 * the definition in double, all four added to what is there; one sample, three, and five on three threads. Then
 * planes wider than high and higher than wide, the width growing between two calls of the same height (the
 * stack keeps its buffers from call to call). */
START_TEST(test_conv_stack)
{
    const nn_backend *be = nn_cpu_onednn(WINO_OWN);
    if (!be || !conv1_direct_blocks_usable(28, 28, 32, 3, 0)) {
        printf("check_conv: no oneDNN or neither AVX-512 nor AVX2 here: wino43's convolution stack does not apply\n");
        return;
    }
    static const struct {
        int N, H, W, threads;
    } cases[] = {{1, 28, 28, 1}, {3, 28, 28, 1}, {5, 28, 28, 3}, {2, 28, 20, 1}, {2, 28, 24, 1}, {2, 20, 28, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        stack_case(be, cases[i].N, cases[i].H, cases[i].W, cases[i].threads, (int)i);
    omp_set_num_threads(1);
}
END_TEST

/* The backend of a build without oneDNN (nn_cpu_own): --conv auto and wino43 name it where the CPU runs the own
 * kernels; net trains on it within rounding of the CPU's composition; and as oneDNN's wino43 backend, bit for
 * bit, where both exist (net's convolutions then run through the same stack on both). */
START_TEST(test_conv_own)
{
    if (!wino43_has_cpu()) {
        ck_assert_msg(nn_cpu_conv("auto") != nn_cpu_own(), "--conv auto chose the own kernels on a CPU without them");
        printf("check_conv: neither AVX-512 nor AVX2 here: the own backend does not apply\n");
        return;
    }
    const nn_backend *onednn = nn_cpu_onednn(WINO_OWN);
    ck_assert_msg(nn_cpu_conv("auto") == (onednn ? onednn : nn_cpu_own()), "--conv auto is not wino43");
    ck_assert_msg(nn_cpu_conv("wino43") == (onednn ? onednn : nn_cpu_own()), "--conv wino43 is not its backend");
    same_training(nn_cpu_own(), "the own backend");
    if (!onednn)
        return;
    enum { N = 7 };
    model *m[2] = {model_create_on(nn_cpu_own(), MODEL_NET, N), model_create_on(onednn, MODEL_NET, N)};
    float *x = malloc((size_t)N * 784 * sizeof *x);
    uint8_t labels[N];
    uint64_t ids[N];
    random_batch(81, N, x, labels, ids);
    for (int k = 0; k < 2; k++)
        model_forward_backward(m[k], x, labels, ids, N, 0x5eedULL, 1.0f / N);
    size_t n = model_num_params(m[0]);
    ck_assert_msg(memcmp(model_grads(m[0]), model_grads(m[1]), n * sizeof(float)) == 0,
                  "the own backend's gradients differ from oneDNN's wino43 backend's");
    model_free(m[0]), model_free(m[1]), free(x);
}
END_TEST

/* wino43's weight gradient sums its samples by parts, one per thread, then adds the parts: three parts of five
 * samples (two, then one, two) against the definitions and differences. */
START_TEST(test_conv_wino43_parts)
{
    const nn_backend *be = nn_cpu_onednn(WINO_OWN);
    if (!be || !wino43_has_cpu()) {
        printf("check_conv: no oneDNN or neither AVX-512 nor AVX2 here: wino43's parts do not apply\n");
        return;
    }
    omp_set_num_threads(3);
    conv_case_on(be, 5, 32, 26, 26, 64, 3, 0, 1, 1, 41, 1e-4);
    conv_case_on(be, 4, 64, 10, 10, 128, 3, 0, 1, 0, 42, 1e-4);
    omp_set_num_threads(1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_conv_nopad);
    tcase_add_test(tc, test_conv_pad);
    tcase_add_loop_test(tc, test_conv_threads, 0, 2); /* 2, 3 threads */
    tcase_add_loop_test(tc, test_conv_onednn, 0, 3);  /* direct, Winograd, wino43 */
    tcase_add_test(tc, test_conv_winograd_runs);
    tcase_add_loop_test(tc, test_conv_pool_onednn, 0, 3);
    tcase_add_test(tc, test_conv_wino43_parts);
    tcase_add_test(tc, test_conv1_direct);
    tcase_add_test(tc, test_conv_stack);
    tcase_add_test(tc, test_conv_own);
    suite_add_tcase(s, tc);
    return check_run(s);
}
