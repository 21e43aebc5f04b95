/* The CUDA backend (nn_cuda(), cuda/layers.cu + cuBLAS) against the CPU backend (nn_cpu) on the same
 * random inputs, on a GPU machine; one process, no MPI (die() exits without it).
 *
 * (a) Every entry of the table on its own. Data movement, selections and elementwise math that both
 *     devices evaluate in the same float operations must agree bit for bit: gather, im2col/col2im
 *     (normal and wide; col2im adds its taps in the same order on both), fill, ReLUs, max-pool (ties
 *     included: the first maximum wins on both), dropout masks, flatten, count_correct. The rest within
 *     a tolerance relative to the largest reference value, because the GPU legitimately rounds
 *     differently: nvcc fuses a * b + c into one FMA where gcc (no -mfma) rounds twice (BatchNorm,
 *     optimizers), CUDA's expf/logf are within 2 ulp rather than glibc's correctly rounded ones
 *     (log-softmax), and per-channel sums and the loss sum add in another order (block trees, in double
 *     on both). Each of these is a few ulp of an element, below 1e-6 of the largest: TOL_ROUND = 1e-5.
 *     GEMMs: cuBLAS and OpenBLAS add the k products in other orders (blocking, split-k); the difference
 *     grows like sqrt(k) ulp of the terms: TOL_GEMM = 1e-5 of max |C| (k <= 9216).
 * (b) Whole models, "net" and "convnet": the same parameters, batch, labels, sample ids and dropout key
 *     through model_forward_backward on each backend; the loss, every parameter gradient and the
 *     BatchNorm running statistics compared, then one optimizer step (net: Adadelta, convnet: SGD with
 *     momentum and weight decay) and the parameter updates compared, then an eval-mode pass. Forward
 *     GEMMs already differ in the last bits, and that difference propagates through every layer; and
 *     rarely a near-tie in a max-pool window or a ReLU input near 0 resolves the other way on the other
 *     device and moves one term of a weight-gradient sum. Tolerance per tensor: max |diff| <= 1e-4 of
 *     max |reference| (fp32); see TOL_MODEL for what was measured.
 * (c) The GEMMs and (b) again with --precision tf32 and bf16 (cuBLAS rounds the GEMM inputs to 10 and 7
 *     mantissa bits, so this measures reduced precision against fp32, with tolerances set from that
 *     rounding; see tolerances()).
 * One line per comparison with its error. Exit 0 pass, 1 fail, 77 (SKIP, one line) without a usable GPU. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "errors.h"
#include "gpu.h"
#include "model.h"
#include "optim.h"
#include "rng.h"

/* Bit-for-bit, and few-ulp elementwise differences (see the header comment). */
#define TOL_EXACT 0.0
#define TOL_ROUND 1e-5
/* The loss sum in double on both devices, in another order. */
#define TOL_SUM 1e-12

/* Per precision: GEMM on random U(-1, 1) operands, and the whole model (loss, gradients, updates,
 * running statistics), all relative to the largest reference value. fp32: see the header comment.
 * tf32 / bf16 round each GEMM input to 10 / 7 mantissa bits (relative error 2^-11 / 2^-8, twice that
 * if truncated); over a dot product of independent terms the error of the result stays below a few
 * times that of one term, relative to max |C|. Through the model the rounding of every layer adds up
 * and flips more pool/ReLU near-ties: 5x the GEMM tolerance. Emulated on the CPU (inputs truncated to
 * tf32/bf16, fp32 accumulation) these measured about a fifth of the tolerance or less. */
typedef struct {
    const char *precision;
    double gemm, model;
} tolerances;

static const tolerances tol_fp32 = {"fp32", 1e-5, 1e-4};
static const tolerances tol_tf32 = {"tf32", 4e-3, 2e-2};
static const tolerances tol_bf16 = {"bf16", 3e-2, 1.5e-1};

/* The two backends: 0 the reference (CPU), 1 the one under test (CUDA). */
static const nn_backend *bk[2];
static int failures;

/* ---- memory on both backends ----------------------------------------------------------------- */

/* The same data on both backends: p[0] CPU memory, p[1] GPU memory. */
typedef struct {
    void *p[2];
    size_t bytes;
} twin;

static twin twin_new(const void *host, size_t bytes)
{
    twin t = {{NULL, NULL}, bytes};
    for (int s = 0; s < 2; s++) {
        t.p[s] = bk[s]->alloc(bytes);
        if (host)
            bk[s]->upload(t.p[s], host, bytes);
        else
            bk[s]->zero(t.p[s], bytes);
    }
    return t;
}

static void twin_free(twin *t)
{
    for (int s = 0; s < 2; s++)
        bk[s]->free(t->p[s]);
    t->p[0] = t->p[1] = NULL;
}

/* Runs call once per backend with `be` the backend and P(t) the twin's memory on it. */
#define BOTH(call)                                                                                       \
    do {                                                                                                 \
        for (int s_ = 0; s_ < 2; s_++) {                                                                 \
            const nn_backend *be = bk[s_];                                                               \
            (void)be;                                                                                    \
            call;                                                                                        \
        }                                                                                                \
    } while (0)
#define P(t) ((t).p[s_])

static void *fetch(int s, const void *src, size_t bytes)
{
    void *h = xmalloc(bytes);
    bk[s]->download(h, src, bytes);
    return h;
}

/* ---- random host data -------------------------------------------------------------------------- */

static uint64_t next_key = 0x5eed;

static float *rnd(size_t n, float lo, float hi)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform(key, i);
    return p;
}

/* Small integers as floats: many exact ties (max-pool, argmax). */
static float *rnd_levels(size_t n, int levels)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rng_below(key, i, (uint32_t)levels) - 1.0f;
    return p;
}

static uint8_t *rnd_bytes(size_t n, unsigned below)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    uint8_t *p = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_below(key, i, below);
    return p;
}

static uint64_t *rnd_u64(size_t n, uint64_t below)
{
    uint64_t key = rng_key(0x6a09e667f3bcc908ULL, next_key++);
    uint64_t *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = below ? rng_u64(key, i) % below : rng_u64(key, i);
    return p;
}

static twin twin_rnd(size_t n, float lo, float hi)
{
    float *h = rnd(n, lo, hi);
    twin t = twin_new(h, n * sizeof *h);
    free(h);
    return t;
}

/* ---- comparisons ------------------------------------------------------------------------------- */

/* ref (CPU) against got (GPU). tol 0: every element bit for bit; otherwise max |got - ref| <= tol
 * max |ref| (a NaN anywhere in got but not in ref fails). One line either way. */
static void compare(const char *what, const float *ref, const float *got, size_t n, double tol)
{
    double maxref = 0.0, maxdiff = 0.0;
    size_t differ = 0, worst = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&ref[i], &got[i], sizeof *ref) != 0)
            differ++;
        if (isnan(got[i]) != isnan(ref[i]))
            nan = 1;
        double d = fabs((double)got[i] - (double)ref[i]);
        if (d > maxdiff) {
            maxdiff = d;
            worst = i;
        }
        if (fabs((double)ref[i]) > maxref)
            maxref = fabs((double)ref[i]);
    }
    double rel = maxref > 0 ? maxdiff / maxref : maxdiff > 0 ? INFINITY : 0.0;
    int ok = !nan && (tol == 0.0 ? differ == 0 : rel <= tol);
    if (tol == 0.0)
        printf("%-4s %-46s exact: %zu of %zu differ, max |diff| %.3g\n", ok ? "ok" : "FAIL", what, differ, n,
               maxdiff);
    else
        printf("%-4s %-46s max |diff| %.3g = %.3g of max |ref| %.3g (tolerance %.0e)\n", ok ? "ok" : "FAIL", what,
               maxdiff, rel, maxref, tol);
    if (!ok) {
        if (nan)
            printf("     a NaN on one device only\n");
        if (n)
            printf("     worst at element %zu of %zu: cpu %.9g, cuda %.9g\n", worst, n, (double)ref[worst],
                   (double)got[worst]);
        failures++;
    }
}

/* The twin's n floats, downloaded from both backends. */
static void check(const char *what, const twin *t, size_t n, double tol)
{
    float *a = fetch(0, t->p[0], n * sizeof *a), *b = fetch(1, t->p[1], n * sizeof *b);
    compare(what, a, b, n, tol);
    free(a);
    free(b);
}

/* Raw bytes (labels, argmax indices, ...): bit for bit. */
static void check_bytes(const char *what, const twin *t)
{
    unsigned char *a = fetch(0, t->p[0], t->bytes), *b = fetch(1, t->p[1], t->bytes);
    size_t differ = 0;
    for (size_t i = 0; i < t->bytes; i++)
        differ += a[i] != b[i];
    printf("%-4s %-46s exact: %zu of %zu bytes differ\n", differ ? "FAIL" : "ok", what, differ, t->bytes);
    failures += differ != 0;
    free(a);
    free(b);
}

static void check_scalar(const char *what, double ref, double got, double tol)
{
    double d = fabs(got - ref), rel = ref != 0 ? d / fabs(ref) : d;
    int ok = rel <= tol;
    printf("%-4s %-46s cpu %.12g, cuda %.12g: relative difference %.3g (tolerance %.0e)\n", ok ? "ok" : "FAIL", what,
           ref, got, rel, tol);
    failures += !ok;
}

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
     * multiple of the block size. */
    twin x = twin_rnd(7 * 1200, -1, 1), out = twin_rnd(10, -2, 2);
    BOTH(be->sum_add(P(out), P(x), 7, 1000, 1200, 1));
    check("sum_add planes (7 x 1000, cstride 1200)", &out, 7, TOL_ROUND);
    BOTH(be->sum_add(P(out), P(x), 10, 301, 1, 10));
    check("sum_add columns (301 x 10)", &out, 10, TOL_ROUND);
    twin_free(&x), twin_free(&out);
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

static void test_maxpool_case(const char *name, int planes, int H, int W, int ld)
{
    int OH = H / 2, OW = W / 2;
    size_t nx = (size_t)planes * H * ld, ny = (size_t)planes * OH * OW;
    char what[96];
    float *hx = rnd_levels(nx, 4); /* 4 levels: most windows hold ties */
    twin x = twin_new(hx, nx * sizeof *hx), y = twin_rnd(ny, -1, 1), arg = twin_new(NULL, ny * sizeof(int32_t));
    BOTH(be->maxpool2_forward(P(x), P(y), P(arg), planes, H, W, ld));
    snprintf(what, sizeof what, "maxpool2_forward %s", name);
    check(what, &y, ny, TOL_EXACT);
    snprintf(what, sizeof what, "maxpool2_forward %s argmax", name);
    check_bytes(what, &arg);
    /* Backward from the CPU's argmax on both (just shown equal), into a dx full of junk: every element
     * must be written. */
    int32_t *harg = fetch(0, arg.p[0], ny * sizeof *harg);
    twin arg0 = twin_new(harg, ny * sizeof *harg), dy = twin_rnd(ny, -1, 1), dx = twin_rnd(nx, 5, 9);
    BOTH(be->maxpool2_backward(P(dy), P(arg0), P(dx), planes, H, W, ld));
    snprintf(what, sizeof what, "maxpool2_backward %s", name);
    check(what, &dx, nx, TOL_EXACT);
    twin_free(&x), twin_free(&y), twin_free(&arg), twin_free(&arg0), twin_free(&dy), twin_free(&dx);
    free(hx), free(harg);
}

static void test_maxpool(void)
{
    test_maxpool_case("24x24 in rows of 26 (net)", 6, 24, 24, 26);
    test_maxpool_case("14x14 (convnet)", 5, 14, 14, 14);
    test_maxpool_case("7x7 (odd: last row/column unused)", 4, 7, 7, 7);
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

static void test_flatten(void)
{
    enum { C = 4, N = 3, HW = 49 };
    size_t n = (size_t)C * N * HW;
    twin x = twin_rnd(n, -1, 1), y = twin_rnd(n, -1, 1), back = twin_rnd(n, -1, 1);
    BOTH(be->flatten_cnhw(P(x), P(y), C, N, HW));
    check("flatten_cnhw", &y, n, TOL_EXACT);
    BOTH(be->unflatten_cnhw(P(y), P(back), C, N, HW));
    check("unflatten_cnhw", &back, n, TOL_EXACT);
    twin_free(&x), twin_free(&y), twin_free(&back);
}

static void test_batchnorm(void)
{
    enum { C = 5 };
    size_t count = 3 * 196 + 7; /* not a multiple of the block size */
    size_t n = C * count;
    float tracked0 = 5.0f;
    twin x = twin_rnd(n, -1, 5), gamma = twin_rnd(C, 0.5f, 1.5f), beta = twin_rnd(C, -0.5f, 0.5f);
    twin y = twin_rnd(n, -1, 1), mean = twin_new(NULL, C * sizeof(float)), invstd = twin_new(NULL, C * sizeof(float));
    twin rmean = twin_rnd(C, -0.5f, 0.5f), rvar = twin_rnd(C, 0.5f, 2.0f), tracked = twin_new(&tracked0, sizeof(float));
    BOTH(be->batchnorm_forward_train(P(x), P(gamma), P(beta), P(y), P(mean), P(invstd), P(rmean), P(rvar),
                                     P(tracked), C, count, 0.1f, 1e-5f));
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
    double sum[2];
    BOTH(sum[s_] = be->sum_losses(P(losses), M));
    check_scalar("sum_losses (1000)", sum[0], sum[1], TOL_SUM);

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
    BOTH(be->adadelta_step(P(p), P(g), P(sq), P(acc), n, 1.0f, 0.9f, 1e-6f, 1e-2f));
    check("adadelta_step: param", &p, n, TOL_ROUND);
    check("adadelta_step: square_avg", &sq, n, TOL_ROUND);
    check("adadelta_step: acc_delta", &acc, n, TOL_ROUND);
    twin buf = twin_rnd(n, -0.1f, 0.1f);
    BOTH(be->sgd_step(P(p), P(g), P(buf), n, 0.05f, 0.9f, 1e-4f));
    check("sgd_step momentum 0.9: param", &p, n, TOL_ROUND);
    check("sgd_step momentum 0.9: buf", &buf, n, TOL_ROUND);
    BOTH(be->sgd_step(P(p), P(g), P(buf), n, 0.05f, 0.0f, 0.0f));
    check("sgd_step momentum 0: param", &p, n, TOL_ROUND);
    check("sgd_step momentum 0: buf untouched", &buf, n, TOL_EXACT);
    twin_free(&p), twin_free(&g), twin_free(&sq), twin_free(&acc), twin_free(&buf);
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

/* ---- (b) whole models --------------------------------------------------------------------------- */

/* Each tensor of a flat buffer (desc: parameters or buffers) compared on its own. */
static void compare_tensors(const char *prefix, const model *m, int buffers, const float *ref, const float *got,
                            double tol)
{
    int count = buffers ? model_num_buffers(m) : model_num_tensors(m);
    for (int i = 0; i < count; i++) {
        const tensor_desc *d = buffers ? model_buffer(m, i) : model_tensor(m, i);
        char what[128];
        snprintf(what, sizeof what, "%s %s", prefix, d->name);
        int exact = buffers && strstr(d->name, "num_batches_tracked") != NULL;
        compare(what, ref + d->offset, got + d->offset, d->count, exact ? TOL_EXACT : tol);
    }
}

static void test_model(const char *name, int n, const tolerances *t)
{
    enum { POOL = 256 };
    const uint64_t seed = 42, dropout_key = 0x9e3779b97f4a7c15ULL;
    char what[128];
    model *m[2];
    for (int s = 0; s < 2; s++) {
        m[s] = model_create_on(bk[s], name, n);
        model_init_params(m[s], seed);
    }
    size_t np = model_num_params(m[0]), nb = model_buffer_size(m[0]);

    /* A batch of noise images drawn from a pool, its labels and (arbitrary) global sample ids. */
    uint8_t *img = rnd_bytes((size_t)POOL * 784, 256), *lab = rnd_bytes(POOL, 10);
    uint64_t *idx = rnd_u64((size_t)n, POOL), *ids = rnd_u64((size_t)n, 60000);
    twin ti = twin_new(img, (size_t)POOL * 784), tl = twin_new(lab, POOL), tidx = twin_new(idx, (size_t)n * 8);
    twin tids = twin_new(ids, (size_t)n * 8), x = twin_new(NULL, (size_t)n * 784 * 4), y = twin_new(NULL, (size_t)n);
    BOTH(be->gather(P(ti), P(tl), P(tidx), n, P(x), P(y)));

    double loss[2];
    BOTH(loss[s_] = model_forward_backward(m[s_], P(x), P(y), P(tids), n, dropout_key, 1.0f / (float)n));
    snprintf(what, sizeof what, "%s [%s] loss (%d samples)", name, t->precision, n);
    check_scalar(what, loss[0], loss[1], t->model);

    float *ref = xmalloc(np * sizeof *ref), *got = xmalloc(np * sizeof *got);
    float *before = xmalloc(np * sizeof *before);
    bk[0]->download(ref, model_grads(m[0]), np * sizeof *ref);
    bk[1]->download(got, model_grads(m[1]), np * sizeof *got);
    snprintf(what, sizeof what, "%s [%s] grad", name, t->precision);
    compare_tensors(what, m[0], 0, ref, got, t->model);
    if (nb) {
        float *rb = xmalloc(nb * sizeof *rb), *gb = xmalloc(nb * sizeof *gb);
        model_download(m[0], NULL, rb);
        model_download(m[1], NULL, gb);
        snprintf(what, sizeof what, "%s [%s] buffer", name, t->precision);
        compare_tensors(what, m[0], 1, rb, gb, t->model);
        free(rb), free(gb);
    }

    /* One optimizer step each: compare the updates (after - before; the parameters start identical). */
    int convnet = strcmp(name, "convnet") == 0;
    optim_cfg cfg = convnet ? (optim_cfg){.kind = OPTIM_SGD, .momentum = 0.9f, .weight_decay = 1e-4f}
                            : (optim_cfg){.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f};
    float lr = convnet ? 0.01f : 1.0f;
    model_download(m[0], before, NULL);
    for (int s = 0; s < 2; s++) {
        optim *o = optim_create_on(bk[s], &cfg, np);
        optim_step(o, model_params(m[s]), model_grads(m[s]), lr);
        model_download(m[s], s ? got : ref, NULL);
        optim_free(o);
    }
    for (size_t i = 0; i < np; i++) {
        ref[i] -= before[i];
        got[i] -= before[i];
    }
    snprintf(what, sizeof what, "%s [%s] %s update", name, t->precision, convnet ? "sgd" : "adadelta");
    compare_tensors(what, m[0], 0, ref, got, t->model);

    /* Eval mode on the updated model (BatchNorm from its running statistics, no dropout). A near-tie of
     * two logits may resolve differently: one prediction of slack. */
    long correct[2] = {0, 0};
    double eloss[2];
    BOTH(eloss[s_] = model_evaluate(m[s_], P(x), P(y), n, &correct[s_]));
    snprintf(what, sizeof what, "%s [%s] evaluate: loss", name, t->precision);
    check_scalar(what, eloss[0], eloss[1], t->model);
    int ok = labs(correct[0] - correct[1]) <= 1;
    snprintf(what, sizeof what, "%s [%s] evaluate: correct", name, t->precision);
    printf("%-4s %-46s cpu %ld, cuda %ld of %d (at most 1 apart)\n", ok ? "ok" : "FAIL", what, correct[0], correct[1],
           n);
    failures += !ok;

    twin_free(&ti), twin_free(&tl), twin_free(&tidx), twin_free(&tids), twin_free(&x), twin_free(&y);
    free(img), free(lab), free(idx), free(ids), free(ref), free(got), free(before);
    for (int s = 0; s < 2; s++)
        model_free(m[s]);
}

/* ---- main ------------------------------------------------------------------------------------- */

/* Batch sizes of the model comparison: the recipes' (net 64, convnet 100). */
enum { NET_BATCH = 64, CONVNET_BATCH = 100 };

static void run_precision(const tolerances *t, int primitives)
{
    gpu_blas_init(t->precision);
    printf("-- cuBLAS precision %s\n", t->precision);
    if (primitives) {
        test_gather();
        test_im2col();
        test_fill_sum();
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
    bk[1] = nn_cuda();

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
