/* The CUDA backend (nn_cuda(): src/gpu/cuda/nn_cuda.cu and cuBLAS) against the CPU backend (nn_cpu) on the same
 * random inputs, on a GPU machine. One process: no MPI (die() exits without it).
 *
 * (a) Every entry of the table on its own. Data movement, selections and elementwise math that both
 *     devices evaluate in the same float operations must agree bit for bit: gather, im2col and col2im
 *     (normal and wide; col2im adds its taps in the same order on both), fill, the ReLUs, max-pool + ReLU (ties
 *     included: the first maximum wins on both), dropout, flatten + dropout, count_correct. The rest within a
 *     tolerance relative to the largest reference value, because the GPU legitimately rounds otherwise:
 *     nvcc fuses a * b + c into one FMA where gcc (no -mfma) rounds twice (BatchNorm, optimizers), CUDA's
 *     expf/logf are within 2 ulp where glibc's are correctly rounded (log-softmax), and per-channel sums
 *     and the loss sum add in another order (block trees; in double on both). Each is a few ulp of an
 *     element, below 1e-6 of the largest: TOL_ROUND = 1e-5. GEMMs: cuBLAS and OpenBLAS add the k
 *     products in other orders (blocking, split-k), a difference of about sqrt(k) ulp of the terms.
 * (b) Whole models, "net" and "convnet" at their recipes' batch sizes (64, 100): the same parameters,
 *     inputs, labels, sample ids and dropout key through model_forward_backward on each backend; the
 *     loss, every parameter gradient and the BatchNorm running statistics compared, then one optimizer
 *     step and the updates, then an eval-mode pass. Inputs and parameters are coarse dyadic numbers, so
 *     the convolutions before the first max-pool are exact on both devices (see test_model); past them
 *     the GEMMs differ in the last bits, and that propagates through every later layer.
 * (c) The GEMMs and the forward + backward of (b) again with cuBLAS in tf32 and bf16, against the fp32
 *     CPU: the cost of reduced precision, within tolerances set from its rounding.
 * Tolerances per precision in `tolerances` below, with what they were set from. One line per
 * comparison with its error. Exit 0 pass, 1 fail, 77 (SKIP and one line) without a usable GPU.
 * This file: (a) and main; gpu_backend_models.c: the models of (b) and (c); gpu_backend_conv2.c: conv2
 * direct's kernels (a) and net with them (b), and on tensor cores (TF32 with (c)'s tf32, 3xTF32 in fp32);
 * gpu_backend_util.c: the twins, random data and comparisons they share (gpu_backend.h). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "nn/layers.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "gpu_backend.h"

/* Per precision, all relative to the reference's scale (see compare_metric), and set from an emulation:
 * this program's comparisons against a CPU "device" with the CUDA backend's whole-batch convolutions whose
 * GEMMs add in another order (split-k with FMAs; or k in two halves: 40 draws), or round their inputs to
 * tf32 / bf16 (truncating, twice cuBLAS's round-to-nearest error; 10 draws).
 * fp32 (measured): GEMMs 6e-7, losses 1e-7, gradients 2e-6 (7e-6 for the BatchNorm-cancelled biases,
 * see compare_tensors), updates within their slack. Tolerances 1e-5, 1e-5, 1e-4: ten times that or more.
 * tf32 / bf16: cuBLAS rounds each GEMM input to 10 / 7 mantissa bits (unit roundoff 2^-11 / 2^-8 to
 * nearest, twice that truncating; storage stays fp32, see docs/gpu.md). Only GEMMs and forward + backward
 * are compared, the gradients by rms difference: the rounding of every layer adds up towards the input,
 * and the fully connected layers' ReLU inputs near 0 now flip now and then, each flip moving a whole row
 * of fc1's gradient. The optimizer step is left out (Adadelta's first step is nearly sign(g): it turns
 * small gradient differences into large ones; the optimizer kernels do not depend on the precision and
 * fp32 checks them). Measured: GEMMs 9e-4 / 7e-3, losses 6e-5 / 4e-4, gradients 5e-2 / 9e-2;
 * tolerances at 3x to 20x that. */
static const tolerances tol_fp32 = {"fp32", 1e-5, 1e-5, 1e-4, 0};
static const tolerances tol_tf32 = {"tf32", 4e-3, 1e-3, 0.15, 1};
static const tolerances tol_bf16 = {"bf16", 3e-2, 5e-3, 0.3, 1};

/* ---- (a) the primitives ------------------------------------------------------------------------ */

static void test_gather(void)
{
    enum { POOL = 100, N = 37 };
    uint8_t *img = rnd_bytes((size_t)POOL * 784, 256), *lab = rnd_bytes(POOL, 10);
    uint64_t *idx = rnd_u64(N, POOL);
    twin ti = twin_new(img, (size_t)POOL * 784), tl = twin_new(lab, POOL), tx = twin_rnd((size_t)N * 784, -9, 9);
    twin tidx = twin_new(idx, N * sizeof *idx), ty = twin_new(NULL, N);
    BOTH(be->gather(P(ti), P(tl), P(tidx), N, P(tx), P(ty)));
    check("gather: images (indexed)", &tx, (size_t)N * 784, TOL_EXACT);
    check_bytes("gather: labels (indexed)", &ty);
    BOTH(be->gather(P(ti), P(tl), NULL, 5, P(tx), NULL)); /* idx NULL: samples 0..4, no labels */
    check("gather: images (first 5, no labels)", &tx, (size_t)N * 784, TOL_EXACT);
    twin_free(&ti), twin_free(&tl), twin_free(&tx), twin_free(&tidx), twin_free(&ty);
    free(img), free(lab), free(idx);
}

/* im2col, then col2im of a random dcol, of samples n0 .. n0+ns-1 of an N-sample batch. */
static void test_im2col_case(const char *name, int N, int C, int H, int W, int k, int pad, int n0, int ns, int wide)
{
    int OH = H + 2 * pad - k + 1, OW = wide ? W : W + 2 * pad - k + 1;
    size_t nx = (size_t)C * N * H * W, ncol = (size_t)C * k * k * ns * OH * OW;
    char what[96];
    twin x = twin_rnd(nx, -1, 1), col = twin_rnd(ncol, -5, 5);
    BOTH(be->im2col(P(x), P(col), N, C, H, W, k, pad, n0, ns, wide));
    snprintf(what, sizeof what, "im2col %s", name);
    check(what, &col, ncol, TOL_EXACT);
    twin dcol = twin_rnd(ncol, -1, 1), dx = twin_rnd(nx, -5, 5); /* samples outside n0.. stay as they were */
    BOTH(be->col2im(P(dcol), P(dx), N, C, H, W, k, pad, n0, ns, wide));
    snprintf(what, sizeof what, "col2im %s", name);
    check(what, &dx, nx, TOL_EXACT);
    twin_free(&x), twin_free(&col), twin_free(&dcol), twin_free(&dx);
}

static void test_im2col(void)
{
    test_im2col_case("5x5 pad 2 (convnet layer2)", 5, 3, 14, 14, 5, 2, 1, 3, 0);
    test_im2col_case("3x3 pad 0 (net conv1)", 4, 1, 28, 28, 3, 0, 0, 4, 0);
    test_im2col_case("3x3 pad 1, not square", 3, 2, 9, 13, 3, 1, 2, 1, 0);
    test_im2col_case("wide 3x3 (net conv2)", 4, 2, 26, 26, 3, 0, 1, 2, 1);
    test_im2col_case("wide 5x5, not square", 2, 3, 11, 8, 5, 0, 0, 2, 1);
}

static void test_fill_sum(void)
{
    enum { ROWS = 6, COLS = 37, LD = 50 };
    twin y = twin_rnd((size_t)ROWS * LD, -3, 3), brow = twin_rnd(ROWS, -1, 1), bcol = twin_rnd(COLS, -1, 1);
    BOTH(be->fill(P(y), P(brow), ROWS, COLS, LD, 1));
    check("fill by row (ld > cols)", &y, (size_t)ROWS * LD, TOL_EXACT);
    BOTH(be->fill(P(y), P(bcol), ROWS, COLS, LD, 0));
    check("fill by column (ld > cols)", &y, (size_t)ROWS * LD, TOL_EXACT);
    twin_free(&y), twin_free(&brow), twin_free(&bcol);

    /* Bias gradients: CNHW planes (cstride > count), and columns of [N][F] (stride F). Counts not a
     * multiple of the block size; one slice per channel, 42 slices (kernels.h), and more channels than
     * one launch's scratch holds (two launch groups). */
    twin x = twin_rnd(3 * 43300, -1, 1), out = twin_rnd(20000, -2, 2);
    BOTH(be->sum_add(P(out), P(x), 7, 1000, 1200, 1));
    check("sum_add planes (7 x 1000, cstride 1200)", &out, 7, TOL_ROUND);
    BOTH(be->sum_add(P(out), P(x), 3, 43269, 43300, 1));
    check("sum_add planes, 42 slices (3 x 43269)", &out, 3, TOL_ROUND);
    BOTH(be->sum_add(P(out), P(x), 10, 301, 1, 10));
    check("sum_add columns (301 x 10)", &out, 10, TOL_ROUND);
    BOTH(be->sum_add(P(out), P(x), 20000, 6, 1, 20000));
    check("sum_add columns, 2 launch groups (6 x 20000)", &out, 20000, TOL_ROUND);
    twin_free(&x), twin_free(&out);
}

/* The GPU's per-channel reductions add their partials in a fixed order (no atomics): the same inputs
 * give the same bits on a second run, whichever blocks finish first. 39 and 42 slices per channel. */
static void test_reductions_repeat(void)
{
    enum { C = 3 };
    size_t count = 43269, n = C * count;
    float zeros[C] = {0}, *got[2][3];
    twin x = twin_rnd(n, 19, 21), g = twin_rnd(C, 0.5f, 1.5f), b = twin_rnd(C, -0.5f, 0.5f);
    const nn_backend *be = bk[1];
    for (int r = 0; r < 2; r++) {
        float *out = be->alloc(C * sizeof *out), *y = be->alloc(n * sizeof *y), *st = be->alloc(5 * C * sizeof *st);
        float *tracked = be->alloc(sizeof *tracked);
        be->upload(out, zeros, sizeof zeros);
        be->sum_add(out, x.p[1], C, count, count, 1);
        be->zero(st, 5 * C * sizeof *st);
        be->batchnorm_forward_train(x.p[1], g.p[1], b.p[1], y, st, st + C, st + 2 * C, st + 3 * C, tracked, C,
                                    count - 3269, 0.1f, 1e-5f);
        be->batchnorm_backward(x.p[1], x.p[1], g.p[1], st, st + C, y, st + 4 * C, st + 4 * C, C, count - 3269);
        got[r][0] = fetch(1, out, C * sizeof *out);
        got[r][1] = fetch(1, st, 5 * C * sizeof *st);
        got[r][2] = fetch(1, y, n * sizeof *y);
        be->free(out), be->free(y), be->free(st), be->free(tracked);
    }
    compare("sum_add run twice on the GPU (42 slices)", got[0][0], got[1][0], C, TOL_EXACT);
    compare("batchnorm statistics and gradient sums run twice", got[0][1], got[1][1], 5 * C, TOL_EXACT);
    compare("batchnorm_backward dx run twice", got[0][2], got[1][2], n, TOL_EXACT);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            free(got[r][k]);
    twin_free(&x), twin_free(&g), twin_free(&b);
}

static void test_relu(void)
{
    /* More elements than one launch has threads (65536 blocks x 256): the grid-stride loop's second lap. */
    size_t big = ((size_t)1 << 24) + 4099;
    twin x = twin_rnd(big, -1, 1);
    BOTH(be->relu_forward(P(x), big));
    check("relu_forward (2^24 + 4099: grid-stride)", &x, big, TOL_EXACT);
    twin_free(&x);

    enum { C = 5, COUNT = 1001 };
    twin a = twin_rnd((size_t)C * COUNT, -1, 1), b = twin_rnd(C, -0.5f, 0.5f);
    BOTH(be->bias_relu_forward(P(a), P(b), C, COUNT));
    check("bias_relu_forward (5 x 1001)", &a, (size_t)C * COUNT, TOL_EXACT);
    twin dy = twin_rnd((size_t)C * COUNT, -1, 1);
    BOTH(be->relu_backward(P(dy), P(a), (size_t)C * COUNT)); /* a: a ReLU output, zeros included */
    check("relu_backward", &dy, (size_t)C * COUNT, TOL_EXACT);
    twin_free(&a), twin_free(&b), twin_free(&dy);
}

/* Max-pool + (bias) ReLU over C x N planes, and its backward. */
static void test_maxpool_case(const char *name, int C, int N, int H, int W, int ld, int bias)
{
    int planes = C * N, OH = H / 2, OW = W / 2;
    size_t nx = (size_t)planes * H * ld, ny = (size_t)planes * OH * OW;
    char what[96];
    float *hx = rnd_levels(nx, 4); /* 4 levels: most windows hold ties, and the ReLU cuts -1 */
    twin x = twin_new(hx, nx * sizeof *hx), y = twin_rnd(ny, -1, 1), arg = twin_new(NULL, ny * sizeof(int32_t));
    twin b = twin_rnd((size_t)C, -1, 1);
    BOTH(be->maxpool2_relu_forward(P(x), bias ? P(b) : NULL, P(y), P(arg), C, N, H, W, ld));
    snprintf(what, sizeof what, "maxpool2_relu_forward %s", name);
    check(what, &y, ny, TOL_EXACT);
    snprintf(what, sizeof what, "maxpool2_relu_forward %s argmax", name);
    check_bytes(what, &arg);
    /* Backward from the CPU's argmax and output on both (just shown equal), into a dx full of junk: every
     * element must be written. */
    int32_t *harg = fetch(0, arg.p[0], ny * sizeof *harg);
    float *hy = fetch(0, y.p[0], ny * sizeof *hy);
    twin arg0 = twin_new(harg, ny * sizeof *harg), y0 = twin_new(hy, ny * sizeof *hy), dy = twin_rnd(ny, -1, 1);
    twin dx = twin_rnd(nx, 5, 9);
    BOTH(be->relu_maxpool2_backward(P(dy), P(y0), P(arg0), P(dx), planes, H, W, ld));
    snprintf(what, sizeof what, "relu_maxpool2_backward %s", name);
    check(what, &dx, nx, TOL_EXACT);
    twin_free(&x), twin_free(&y), twin_free(&arg), twin_free(&b), twin_free(&arg0), twin_free(&y0), twin_free(&dy);
    twin_free(&dx);
    free(hx), free(harg), free(hy);
}

static void test_maxpool(void)
{
    test_maxpool_case("24x24 in rows of 26, bias (net)", 6, 3, 24, 24, 26, 1);
    test_maxpool_case("14x14 (convnet)", 5, 2, 14, 14, 14, 0);
    test_maxpool_case("7x7 (odd: last row/column unused), bias", 4, 3, 7, 7, 7, 1);
}

static void test_dropout(void)
{
    enum { N = 7, D1 = 1000, D2 = 128 };
    uint64_t *ids = rnd_u64(N, 0), key = 0x0123456789abcdefULL;
    twin tid = twin_new(ids, N * sizeof *ids);
    twin x = twin_rnd((size_t)N * D1, -1, 1), mask = twin_rnd((size_t)N * D1, -1, 1);
    BOTH(be->dropout_forward(P(x), P(mask), N, D1, P(tid), key, 0, 0.25f));
    check("dropout_forward p 0.25 layer 0: x", &x, (size_t)N * D1, TOL_EXACT);
    check("dropout_forward p 0.25 layer 0: mask", &mask, (size_t)N * D1, TOL_EXACT);
    twin x2 = twin_rnd((size_t)N * D2, -1, 1), mask2 = twin_rnd((size_t)N * D2, -1, 1);
    BOTH(be->dropout_forward(P(x2), P(mask2), N, D2, P(tid), key, 1, 0.5f));
    check("dropout_forward p 0.5 layer 1: mask", &mask2, (size_t)N * D2, TOL_EXACT);
    twin dy = twin_rnd((size_t)N * D1, -1, 1);
    BOTH(be->dropout_backward(P(dy), P(mask), (size_t)N * D1));
    check("dropout_backward", &dy, (size_t)N * D1, TOL_EXACT);
    twin_free(&tid), twin_free(&x), twin_free(&mask), twin_free(&x2), twin_free(&mask2), twin_free(&dy);
    free(ids);
}

/* Flatten (+ dropout) and back: without dropout, then with (p 0.25, layer 0: net's first). */
static void test_flatten(void)
{
    enum { C = 4, N = 3, HW = 49 };
    size_t n = (size_t)C * N * HW;
    uint64_t *ids = rnd_u64(N, 0), key = 0x0123456789abcdefULL;
    twin tid = twin_new(ids, N * sizeof *ids), mask = twin_rnd(n, -1, 1);
    twin x = twin_rnd(n, -1, 1), y = twin_rnd(n, -1, 1), back = twin_rnd(n, -1, 1);
    for (int drop = 0; drop < 2; drop++) {
        BOTH(be->flatten_dropout_forward(P(x), P(y), drop ? P(mask) : NULL, C, N, HW, P(tid), key, 0, 0.25f));
        check(drop ? "flatten_dropout_forward p 0.25" : "flatten_dropout_forward, no dropout", &y, n, TOL_EXACT);
        BOTH(be->dropout_unflatten_backward(P(y), drop ? P(mask) : NULL, P(back), C, N, HW));
        check(drop ? "dropout_unflatten_backward p 0.25" : "dropout_unflatten_backward, no dropout", &back, n,
              TOL_EXACT);
    }
    check("flatten_dropout_forward p 0.25: mask", &mask, n, TOL_EXACT);
    twin_free(&tid), twin_free(&mask), twin_free(&x), twin_free(&y), twin_free(&back);
    free(ids);
}

/* count not a multiple of the block size; one slice per channel or many (kernels.h). */
static void test_batchnorm_case(int C, size_t count)
{
    size_t n = C * count;
    float tracked0 = 5.0f;
    twin x = twin_rnd(n, -1, 5), gamma = twin_rnd(C, 0.5f, 1.5f), beta = twin_rnd(C, -0.5f, 0.5f);
    twin y = twin_rnd(n, -1, 1), mean = twin_new(NULL, C * sizeof(float)), invstd = twin_new(NULL, C * sizeof(float));
    twin rmean = twin_rnd(C, -0.5f, 0.5f), rvar = twin_rnd(C, 0.5f, 2.0f), tracked = twin_new(&tracked0, sizeof(float));
    BOTH(be->batchnorm_forward_train(P(x), P(gamma), P(beta), P(y), P(mean), P(invstd), P(rmean), P(rvar), P(tracked),
                                     C, count, 0.1f, 1e-5f));
    check("batchnorm_forward_train: y", &y, n, TOL_ROUND);
    check("batchnorm_forward_train: mean", &mean, C, TOL_ROUND);
    check("batchnorm_forward_train: invstd", &invstd, C, TOL_ROUND);
    check("batchnorm_forward_train: running_mean", &rmean, C, TOL_ROUND);
    check("batchnorm_forward_train: running_var", &rvar, C, TOL_ROUND);
    check("batchnorm_forward_train: num_batches_tracked", &tracked, 1, TOL_EXACT);

    BOTH(be->batchnorm_forward_eval(P(x), P(gamma), P(beta), P(rmean), P(rvar), P(y), C, count, 1e-5f));
    check("batchnorm_forward_eval", &y, n, TOL_ROUND);

    /* Backward from the CPU's mean and invstd on both; dgamma and dbeta accumulate onto random values.
     * Then in place (dx = dy), as the model calls it. */
    float *hm = fetch(0, mean.p[0], C * sizeof *hm), *hs = fetch(0, invstd.p[0], C * sizeof *hs);
    twin m0 = twin_new(hm, C * sizeof *hm), s0 = twin_new(hs, C * sizeof *hs);
    twin dy = twin_rnd(n, -1, 1), dx = twin_rnd(n, -1, 1), dgamma = twin_rnd(C, -1, 1), dbeta = twin_rnd(C, -1, 1);
    BOTH(be->batchnorm_backward(P(x), P(dy), P(gamma), P(m0), P(s0), P(dx), P(dgamma), P(dbeta), C, count));
    check("batchnorm_backward: dx", &dx, n, TOL_ROUND);
    check("batchnorm_backward: dgamma", &dgamma, C, TOL_ROUND);
    check("batchnorm_backward: dbeta", &dbeta, C, TOL_ROUND);
    BOTH(be->batchnorm_backward(P(x), P(dy), P(gamma), P(m0), P(s0), P(dy), P(dgamma), P(dbeta), C, count));
    check("batchnorm_backward in place (dx = dy)", &dy, n, TOL_ROUND);
    twin *all[] = {&x, &gamma, &beta, &y, &mean, &invstd, &rmean, &rvar, &tracked, &m0, &s0, &dy, &dx, &dgamma, &dbeta};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        twin_free(all[i]);
    free(hm), free(hs);
}

static void test_batchnorm(void)
{
    test_batchnorm_case(5, 3 * 196 + 7);
    test_batchnorm_case(2, 40037); /* 39 slices */
}

static void test_loss(void)
{
    enum { N = 300, K = 10 };
    uint8_t *lab = rnd_bytes(N, K);
    twin z = twin_rnd((size_t)N * K, -8, 8), labels = twin_new(lab, N), logp = twin_new(NULL, (size_t)N * K * 4);
    twin loss = twin_new(NULL, N * sizeof(float));
    BOTH(be->log_softmax_nll_forward(P(z), P(labels), P(logp), P(loss), N, K));
    check("log_softmax_nll_forward: logp", &logp, (size_t)N * K, TOL_ROUND);
    check("log_softmax_nll_forward: loss", &loss, N, TOL_ROUND);

    float *hl = fetch(0, logp.p[0], (size_t)N * K * sizeof *hl);
    twin lp0 = twin_new(hl, (size_t)N * K * sizeof *hl), dz = twin_rnd((size_t)N * K, -1, 1);
    BOTH(be->log_softmax_nll_backward(P(lp0), P(labels), P(dz), N, K, 1.0f / N));
    check("log_softmax_nll_backward", &dz, (size_t)N * K, TOL_ROUND);

    enum { M = 1000 }; /* more samples than one block has threads */
    twin losses = twin_rnd(M, 0, 5);
    double sum[2], start = 1.5; /* add_losses adds (twice here) to what the accumulator holds */
    twin acc = twin_new(&start, sizeof start);
    BOTH(be->add_losses(P(losses), M, P(acc)); be->add_losses(P(losses), M, P(acc)));
    BOTH(be->download(&sum[s_], P(acc), sizeof sum[s_]));
    check_scalar("add_losses (1000, twice, onto 1.5)", sum[0], sum[1], TOL_SUM);

    float *hz = rnd_levels((size_t)M * K, 3); /* ties: the first maximum is the prediction */
    uint8_t *lab2 = rnd_bytes(M, K);
    twin zz = twin_new(hz, (size_t)M * K * sizeof *hz), ll = twin_new(lab2, M);
    long correct[2];
    BOTH(correct[s_] = be->count_correct(P(zz), P(ll), M, K));
    printf("%-4s %-46s cpu %ld, cuda %ld (exact)\n", correct[0] == correct[1] ? "ok" : "FAIL",
           "count_correct (1000, with ties)", correct[0], correct[1]);
    failures += correct[0] != correct[1];
    twin_free(&z), twin_free(&labels), twin_free(&logp), twin_free(&loss), twin_free(&lp0), twin_free(&dz);
    twin_free(&losses), twin_free(&zz), twin_free(&ll);
    free(lab), free(hl), free(hz), free(lab2);
}

static void test_optimizers(void)
{
    size_t n = 100003;
    twin p = twin_rnd(n, -1, 1), g = twin_rnd(n, -0.1f, 0.1f), sq = twin_rnd(n, 0, 1e-2f), acc = twin_rnd(n, 0, 1e-4f);
    BOTH(be->adadelta_step(P(p), P(g), P(sq), P(acc), n, 1.0f, 0.9f, 1e-6f, 1e-2f, NULL));
    check("adadelta_step: param", &p, n, TOL_ROUND);
    check("adadelta_step: square_avg", &sq, n, TOL_ROUND);
    check("adadelta_step: acc_delta", &acc, n, TOL_ROUND);
    twin buf = twin_rnd(n, -0.1f, 0.1f);
    BOTH(be->sgd_step(P(p), P(g), P(buf), n, 0.05f, 0.9f, 1e-4f, NULL));
    check("sgd_step momentum 0.9: param", &p, n, TOL_ROUND);
    check("sgd_step momentum 0.9: buf", &buf, n, TOL_ROUND);
    /* Without momentum each side's buffer must keep its own bits: a fresh buffer, compared with what was
     * uploaded (the two sides' buffers above already differ by rounding). */
    float *hb = rnd(n, -0.1f, 0.1f);
    twin buf0 = twin_new(hb, n * sizeof *hb);
    BOTH(be->sgd_step(P(p), P(g), P(buf0), n, 0.05f, 0.0f, 0.0f, NULL));
    check("sgd_step momentum 0: param", &p, n, TOL_ROUND);
    for (int s = 0; s < 2; s++) {
        float *got = fetch(s, buf0.p[s], n * sizeof *got);
        compare(s ? "sgd_step momentum 0: buf untouched (cuda)" : "sgd_step momentum 0: buf untouched (cpu)", hb, got,
                n, TOL_EXACT);
        free(got);
    }
    /* With clear (the trainer's optim_step_clear): the same update, and the gradient zeroed on each side. */
    BOTH(be->adadelta_step(P(p), P(g), P(sq), P(acc), n, 1.0f, 0.9f, 1e-6f, 1e-2f, P(g)));
    check("adadelta_step clearing the gradient: param", &p, n, TOL_ROUND);
    float *zeros = calloc(n, sizeof *zeros);
    for (int s = 0; s < 2; s++) {
        float *got = fetch(s, g.p[s], n * sizeof *got);
        compare(s ? "adadelta_step: gradient cleared (cuda)" : "adadelta_step: gradient cleared (cpu)", zeros, got, n,
                TOL_EXACT);
        free(got);
    }
    twin_free(&p), twin_free(&g), twin_free(&sq), twin_free(&acc), twin_free(&buf), twin_free(&buf0);
    free(hb), free(zeros);
}

/* C[m][n] = alpha op(A) op(B) + beta C, row-major with padded leading dimensions (the padding must stay
 * untouched). */
static void test_gemm_case(int ta, int tb, int m, int n, int k, double tol)
{
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int lda = ac + 3, ldb = bc + 5, ldc = n + 2;
    twin a = twin_rnd((size_t)ar * lda, -1, 1), b = twin_rnd((size_t)br * ldb, -1, 1);
    twin c = twin_rnd((size_t)m * ldc, -1, 1);
    BOTH(be->gemm(ta, tb, m, n, k, 0.75f, P(a), lda, P(b), ldb, 0.5f, P(c), ldc));
    char what[96];
    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
    check(what, &c, (size_t)m * ldc, tol);
    twin_free(&a), twin_free(&b), twin_free(&c);
}

static void test_gemm(const tolerances *t)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            test_gemm_case(ta, tb, 37, 53, 300, t->gemm);
    test_gemm_case(0, 1, 64, 128, 9216, t->gemm); /* net's fc1 forward */
    test_gemm_case(0, 0, 64, 1, 288, t->gemm);    /* a single column */
}

/* ---- main ------------------------------------------------------------------------------------- */

/* MNIST_DDP_CONV1=direct: net's conv1 with its bias and ReLU as one kernel, and its weight and bias gradients
 * as one reduction, against the CPU's im2col, GEMM, bias pass and sum_add (sums in another order: TOL_ROUND),
 * then the whole net on that backend. */
static void test_conv1_direct(const tolerances *t)
{
    enum { N = 7, H = 28, W = 28, F = 32, K = 3, OUT = F * N * 26 * 26 };
    const nn_backend *composed = bk[1];
    bk[1] = nn_cuda(NN_CUDA_CONV1_DIRECT);
    twin x = twin_rnd((size_t)N * H * W, -1, 1), w = twin_rnd(F * K * K, -0.5f, 0.5f), b = twin_rnd(F, -0.2f, 0.2f);
    twin y = twin_new(NULL, OUT * sizeof(float)), col = twin_new(NULL, (size_t)K * K * N * 26 * 26 * sizeof(float));
    BOTH(conv_bias_relu_forward(be, P(x), P(w), P(b), P(y), N, 1, H, W, F, K, 0, P(col), N, 0));
    check("conv1 direct, bias, ReLU (net conv1, 7 samples)", &y, OUT, TOL_ROUND);
    /* Its gradients in one reduction (double sums in another order than the CPU's GEMM and sum_add). */
    twin dy = twin_rnd(OUT, -1, 1), dw = twin_rnd(F * K * K, -0.1f, 0.1f), db = twin_rnd(F, -0.1f, 0.1f);
    BOTH(conv_backward(be, P(x), P(w), P(dy), P(dw), P(db), NULL, N, 1, H, W, F, K, 0, P(col), N, 0));
    check("conv1 direct weight gradient", &dw, F * K * K, TOL_ROUND);
    check("conv1 direct bias gradient", &db, F, TOL_ROUND);
    twin_free(&x), twin_free(&w), twin_free(&b), twin_free(&y), twin_free(&col), twin_free(&dy), twin_free(&dw),
        twin_free(&db);
    printf("-- conv1 direct (MNIST_DDP_CONV1=direct): net (forward and gradients), convnet (gradients)\n");
    test_model("net", NET_BATCH, t);
    test_model("convnet", CONVNET_BATCH, t);
    bk[1] = composed;
}

/* MNIST_DDP_HEAD=fused: net's training head as one kernel (from fc1's bias: the loss, fc2's gradients, fc1's
 * output gradient through dropout and ReLU and its bias gradient), alone and with conv1 direct, against the
 * CPU's composition. */
static void test_head_fused(const tolerances *t)
{
    const nn_backend *composed = bk[1];
    printf("-- net's head as one kernel (MNIST_DDP_HEAD=fused); with conv1 direct too\n");
    bk[1] = nn_cuda(NN_CUDA_HEAD_FUSED);
    test_model("net", NET_BATCH, t);
    bk[1] = nn_cuda(NN_CUDA_HEAD_FUSED | NN_CUDA_CONV1_DIRECT);
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}

/* MNIST_DDP_POOL=fused: conv2's pool with dropout1 as one kernel, its backward with conv2's bias gradient as
 * one reduction over the pooled gradient, conv1's ReLU backward in col2im. Tested alone and with the other two
 * switches, against the CPU's composition (net only: convnet's pools follow a BatchNorm, not a convolution). */
static void test_pool_fused(const tolerances *t)
{
    const nn_backend *composed = bk[1];
    printf("-- conv2's pool with dropout1, both ways (MNIST_DDP_POOL=fused); with all three switches\n");
    bk[1] = nn_cuda(NN_CUDA_POOL_FUSED);
    test_model("net", NET_BATCH, t);
    bk[1] = nn_cuda(NN_CUDA_POOL_FUSED | NN_CUDA_HEAD_FUSED | NN_CUDA_CONV1_DIRECT);
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}

/* MNIST_DDP_FC=epilogue: the fc layers' forward as one cuBLASLt matmul (bias, and fc1's ReLU, in its epilogue)
 * against the CPU's GEMM, bias and ReLU at net's shapes (cuBLASLt's kernels: the GEMM's tolerance); then net. */
static void test_fc_epilogue(const tolerances *t)
{
    static const int shapes[][3] = {{64, 9216, 128}, {64, 128, 10}, {7, 300, 37}}; /* N, in, out */
    const nn_backend *composed = bk[1];
    printf("-- the fc layers' forward as cuBLASLt matmuls with epilogues (MNIST_DDP_FC=epilogue)\n");
    bk[1] = nn_cuda(NN_CUDA_FC_EPILOGUE);
    for (int i = 0; i < 3; i++) {
        int N = shapes[i][0], in = shapes[i][1], out = shapes[i][2];
        twin x = twin_rnd((size_t)N * in, -1, 1), w = twin_rnd((size_t)out * in, -1, 1), b = twin_rnd(out, -1, 1);
        twin y = twin_new(NULL, (size_t)N * out * sizeof(float));
        char what[96];
        for (int relu = 0; relu < 2; relu++) {
            BOTH((relu ? linear_relu_forward : linear_forward)(be, P(x), P(w), P(b), P(y), N, in, out));
            snprintf(what, sizeof what, "linear%s %dx%d->%d, epilogue", relu ? " + ReLU" : "", N, in, out);
            check(what, &y, (size_t)N * out, t->gemm);
        }
        twin_free(&x), twin_free(&w), twin_free(&b), twin_free(&y);
    }
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}

static void run_precision(const tolerances *t, int primitives)
{
    gpu_blas_init(t->precision);
    printf("-- cuBLAS precision %s\n", t->precision);
    if (primitives) {
        test_gather();
        test_im2col();
        test_fill_sum();
        test_reductions_repeat();
        test_relu();
        test_maxpool();
        test_dropout();
        test_flatten();
        test_batchnorm();
        test_loss();
        test_optimizers();
    }
    test_gemm(t);
    test_model("net", NET_BATCH, t);
    test_model("convnet", CONVNET_BATCH, t);
    test_fc_epilogue(t);
    if (primitives) {
        test_conv1_direct(t);
        test_head_fused(t);
        test_pool_fused(t);
        test_conv2_direct(t);
        test_conv2_3xtf32(t);
    }
    if (strcmp(t->precision, "tf32") == 0)
        test_conv2_tf32(t);
    gpu_blas_free();
}

int main(void)
{
    error_set_program("gpu_backend");
    setvbuf(stdout, NULL, _IOLBF, 0);
    char why[GPU_MSG_LEN];
    if (!gpu_available(why, sizeof why)) {
        printf("SKIP: no usable GPU: %s\n", why);
        return 77;
    }
    gpu_info info;
    if (gpu_probe(0, &info, why, sizeof why) != 0) {
        printf("SKIP: no usable GPU: %s\n", why);
        return 77;
    }
    gpu_bind(&info);
    printf("GPU %d: %s (%s), compute capability %d.%d\n", info.device, info.name, info.pci_bus_id, info.cc_major,
           info.cc_minor);
    bk[0] = &nn_cpu;
    bk[1] = nn_cuda(0);

    run_precision(&tol_fp32, 1);
    run_precision(&tol_tf32, 0);
    run_precision(&tol_bf16, 0);

    gpu_release();
    if (failures) {
        printf("FAIL: %d comparison%s out of tolerance\n", failures, failures == 1 ? "" : "s");
        return 1;
    }
    printf("PASS: the CUDA backend agrees with the CPU backend\n");
    return 0;
}
