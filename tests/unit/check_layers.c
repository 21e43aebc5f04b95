/* Layer kernels: forward values against direct formulas, and backward against central finite
 * differences of the scalar L = sum_j r_j y_j (r random, accumulated in double) at random
 * coordinates. The layers compute in float, so the differences are taken in float with the actual
 * step ((x + h) - (x - h) evaluated in double); tolerances are stated per test. Then the whole
 * models, end to end on a tiny batch. The convolutions, the CPU's and oneDNN's, are in check_conv;
 * fd_check in layer_testutil.h. */
#include "../check_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "nn/model.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/ops.h"
#include "base/rng.h"
#include "layer_testutil.h"
#include "model_testutil.h"

/* ---------------------------------------------------------------- linear */

typedef struct {
    int N, in, out;
    float *x, *w, *b, *y, *r;
} lin_ctx;

static double linear_loss(void *p)
{
    lin_ctx *c = p;
    linear_forward(&nn_cpu, c->x, c->w, c->b, c->y, c->N, c->in, c->out);
    return dot(c->r, c->y, (size_t)c->N * c->out);
}

/* Linear in every input: exact up to rounding (errors ~1e-5 on gradients ~1). */
START_TEST(test_linear)
{
    lin_ctx c = {3, 7, 5, NULL, NULL, NULL, NULL, NULL};
    c.x = random_floats(21, 21, -1, 1), c.w = random_floats(35, 22, -1, 1), c.b = random_floats(5, 23, -1, 1),
    c.r = random_floats(15, 24, -1, 1);
    c.y = zeros(15);
    linear_loss(&c);
    for (int n = 0; n < 3; n++)
        for (int o = 0; o < 5; o++) {
            double s = c.b[o];
            for (int i = 0; i < 7; i++)
                s += (double)c.x[n * 7 + i] * c.w[o * 7 + i];
            ck_assert_msg(fabs(c.y[n * 5 + o] - s) < 1e-5, "linear y[%d][%d]", n, o);
        }
    float *dx = zeros(21), *dw = zeros(35), *db = zeros(5);
    linear_backward(&nn_cpu, c.x, c.w, c.r, dw, db, dx, 3, 7, 5);
    fd_check("linear dx", linear_loss, &c, c.x, dx, 21, 0, 0.05f, 1e-4, 1e-4, 0);
    fd_check("linear dw", linear_loss, &c, c.w, dw, 35, 0, 0.05f, 1e-4, 1e-4, 0);
    fd_check("linear db", linear_loss, &c, c.b, db, 5, 0, 0.05f, 1e-4, 1e-4, 0);
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y), free(dx), free(dw), free(db);
}
END_TEST

/* ---------------------------------------------------------------- bias gradient sums */

/* cpu_sum_add sums several channels at once; each channel must still get op_sum's value bit for bit.
 * Values in (-1, 1) plus count / 2 pairs of +-2^60 eight or twelve apart (one lane of op_sum): while a
 * partial sum holds one, the small values added to it are rounded away, so which are lost (a
 * float-sized change of the result) depends on the order and the lanes. Shapes:
 * channel planes (7 = one group of four and three left over, counts not multiples of 4, a gap
 * between planes) and columns of [N][F] (stride F); out starts nonzero (sum_add adds). */
START_TEST(test_sum_add)
{
    static const struct {
        int channels;
        size_t count, cstride, stride;
    } t[] = {{7, 1003, 1010, 1}, {9, 1002, 1002, 1}, {10, 301, 1, 10}, {4, 3, 3, 1}, {5, 0, 0, 1}};
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        size_t n = (size_t)t[k].channels * t[k].cstride + t[k].count * t[k].stride;
        float *x = random_floats(n, rng_key(25, k), -1, 1), *out = random_floats((size_t)t[k].channels, 26, -1, 1);
        for (size_t c = 0; c < (size_t)t[k].channels && t[k].count > 12; c++)
            for (uint64_t j = 0; j < t[k].count / 2; j++) {
                size_t p = rng_below(rng_key(27, c), 2 * j, (uint32_t)t[k].count - 12);
                size_t q = p + 4 * (2 + rng_below(rng_key(27, c), 2 * j + 1, 2));
                x[c * t[k].cstride + p * t[k].stride] += 0x1p60f;
                x[c * t[k].cstride + q * t[k].stride] -= 0x1p60f;
            }
        float *want = malloc((size_t)t[k].channels * sizeof *want);
        for (int c = 0; c < t[k].channels; c++)
            want[c] = out[c] + op_sum(x + (size_t)c * t[k].cstride, t[k].count, t[k].stride);
        cpu_sum_add(out, x, t[k].channels, t[k].count, t[k].cstride, t[k].stride);
        for (int c = 0; c < t[k].channels; c++)
            ck_assert_msg(!memcmp(&out[c], &want[c], sizeof *out), "case %zu channel %d: sum_add %.9g, op_sum %.9g", k,
                          c, (double)out[c], (double)want[c]);
        free(x), free(out), free(want);
    }
}
END_TEST

/* ---------------------------------------------------------------- ReLU */

typedef struct {
    size_t n;
    float *x, *y, *r;
} relu_ctx;

static double relu_loss(void *p)
{
    relu_ctx *c = p;
    memcpy(c->y, c->x, c->n * sizeof *c->x);
    cpu_relu_forward(c->y, c->n);
    return dot(c->r, c->y, c->n);
}

/* Inputs at least 0.1 away from the kink and h = 0.05: piecewise linear, exact up to rounding. */
START_TEST(test_relu)
{
    relu_ctx c = {50, random_floats(50, 31, 0.1f, 1.0f), zeros(50), random_floats(50, 32, -1, 1)};
    for (size_t i = 0; i < c.n; i += 2)
        c.x[i] = -c.x[i];
    relu_loss(&c);
    float *dy = malloc(50 * sizeof *dy);
    memcpy(dy, c.r, 50 * sizeof *dy);
    cpu_relu_backward(dy, c.y, c.n);
    fd_check("relu dx", relu_loss, &c, c.x, dy, c.n, 0, 0.05f, 1e-5, 1e-6, 0);
    free(c.x), free(c.y), free(c.r), free(dy);
}
END_TEST

/* ---------------------------------------------------------------- max-pool */

typedef struct {
    int planes, H, W;
    float *x, *y, *r;
    int32_t *arg;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    cpu_maxpool2_forward(c->x, c->y, c->arg, c->planes, c->H, c->W, c->W);
    return dot(c->r, c->y, (size_t)c->planes * (c->H / 2) * (c->W / 2));
}

/* Values are a random permutation of 0.1 * i: gaps of 0.1 > 2h, so no perturbation changes an
 * argmax and the map is piecewise linear: exact up to rounding. Odd sizes leave the last row and
 * column out of every window (gradient 0, checked by the differences too). Ties separately. */
START_TEST(test_maxpool)
{
    pool_ctx c = {3, 7, 6, NULL, NULL, NULL, NULL};
    size_t nx = 3 * 7 * 6, ny = 3 * 3 * 3;
    c.x = zeros(nx), c.y = zeros(ny), c.r = random_floats(ny, 41, -1, 1), c.arg = calloc(ny, sizeof(int32_t));
    for (size_t i = 0; i < nx; i++)
        c.x[i] = 0.1f * (float)i;
    for (size_t i = nx - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = rng_below(42, i, (uint32_t)(i + 1));
        float t = c.x[i];
        c.x[i] = c.x[j], c.x[j] = t;
    }
    pool_loss(&c);
    for (int p = 0; p < 3; p++)
        for (int ph = 0; ph < 3; ph++)
            for (int pw = 0; pw < 3; pw++) {
                const float *xp = c.x + p * 42;
                float m = fmaxf(fmaxf(xp[2 * ph * 6 + 2 * pw], xp[2 * ph * 6 + 2 * pw + 1]),
                                fmaxf(xp[(2 * ph + 1) * 6 + 2 * pw], xp[(2 * ph + 1) * 6 + 2 * pw + 1]));
                ck_assert_float_eq(c.y[(p * 3 + ph) * 3 + pw], m);
            }
    /* Ties go to the first maximum in row-major order, as in PyTorch. */
    const float tie[16] = {1, 1, 0, 3, 1, 1, 3, 3, 2, 5, 4, 4, 5, 0, 4, 4};
    float ty[4];
    int32_t targ[4];
    cpu_maxpool2_forward(tie, ty, targ, 1, 4, 4, 4);
    ck_assert_int_eq(targ[0], 0);
    ck_assert_int_eq(targ[1], 3);
    ck_assert_int_eq(targ[2], 9);
    ck_assert_int_eq(targ[3], 10);
    float *dx = zeros(nx);
    cpu_maxpool2_backward(c.r, c.arg, dx, 3, 7, 6, 6);
    fd_check("maxpool dx", pool_loss, &c, c.x, dx, nx, 0, 0.02f, 1e-5, 1e-5, 0);
    /* Planes with rows of ld = 9 > W (the wide convolution layout): same results, junk columns of
     * dx zeroed. */
    float *xw = random_floats(3 * 7 * 9, 43, -1, 1), *dxw = random_floats(3 * 7 * 9, 44, -1, 1), yw[27];
    int32_t argw[27];
    for (int i = 0; i < 3 * 7; i++)
        memcpy(xw + i * 9, c.x + i * 6, 6 * sizeof(float));
    cpu_maxpool2_forward(xw, yw, argw, 3, 7, 6, 9);
    ck_assert_mem_eq(yw, c.y, sizeof yw);
    cpu_maxpool2_backward(c.r, argw, dxw, 3, 7, 6, 9);
    for (int i = 0; i < 3 * 7 * 9; i++)
        ck_assert_float_eq(dxw[i], i % 9 < 6 ? dx[i / 9 * 6 + i % 9] : 0.0f);
    free(xw), free(dxw);
    free(c.x), free(c.y), free(c.r), free(c.arg), free(dx);
}
END_TEST

/* ---------------------------------------------------------------- dropout */

/* The mask is the documented function of (key, sample id, layer, element), so it does not depend on
 * the sample's position in the batch; the kept fraction is 1 - p; kept values scale by 1/(1-p).
 * Dropout is linear for a fixed mask, so its backward is checked exactly (the same multipliers). */
START_TEST(test_dropout)
{
    enum { N = 4, D = 5000 };
    const uint64_t ids[N] = {7, 123456, 3, 59999}, rev[N] = {59999, 3, 123456, 7};
    const uint64_t key = 0xfeedULL;
    const float ps[2] = {0.25f, 0.5f};
    for (int layer = 0; layer < 2; layer++) {
        float p = ps[layer], scale = 1.0f / (1.0f - p);
        float *x = random_floats(N * D, 51, 0.5f, 1.0f), *y = malloc(N * D * sizeof *y), *z = malloc(N * D * sizeof *z);
        float *mask = malloc(N * D * sizeof *mask), *mask_rev = malloc(N * D * sizeof *mask);
        memcpy(y, x, N * D * sizeof *x);
        cpu_dropout_forward(y, mask, N, D, ids, key, layer, p);
        long kept = 0;
        for (int n = 0; n < N; n++) {
            uint64_t sk = rng_key(rng_key(key, ids[n]), (uint64_t)layer);
            for (int e = 0; e < D; e++) {
                size_t i = (size_t)n * D + e;
                int want = rng_uniform(sk, (uint64_t)e) >= p;
                ck_assert_float_eq(mask[i], want ? scale : 0.0f);
                ck_assert_float_eq(y[i], want ? x[i] * scale : 0.0f);
                kept += want;
            }
        }
        /* 20000 Bernoulli draws: the standard deviation of the fraction is <= 0.0036. */
        ck_assert_msg(fabs((double)kept / (N * D) - (1.0 - p)) < 0.02, "kept fraction %g for p %g",
                      (double)kept / (N * D), (double)p);
        /* Same samples in reverse order: the same masks, reversed. */
        for (int n = 0; n < N; n++)
            memcpy(z + (size_t)n * D, x + (size_t)(N - 1 - n) * D, D * sizeof *x);
        cpu_dropout_forward(z, mask_rev, N, D, rev, key, layer, p);
        for (int n = 0; n < N; n++)
            ck_assert_mem_eq(mask_rev + (size_t)n * D, mask + (size_t)(N - 1 - n) * D, D * sizeof *mask);
        /* Backward: dy times the same multipliers. */
        memcpy(z, x, N * D * sizeof *x);
        cpu_dropout_backward(z, mask, N * D);
        ck_assert_mem_eq(z, y, N * D * sizeof *y);
        free(x), free(y), free(z), free(mask), free(mask_rev);
    }
    /* Another layer index gives another mask. */
    float a[64], b[64], ma[64], mb[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = 1.0f;
    cpu_dropout_forward(a, ma, 1, 64, (const uint64_t[]){5}, key, 0, 0.5f);
    cpu_dropout_forward(b, mb, 1, 64, (const uint64_t[]){5}, key, 1, 0.5f);
    ck_assert(memcmp(ma, mb, sizeof ma) != 0);
}
END_TEST

/* The mask compares integer draws with op_dropout_threshold(p); the rule stays draw >= p at its edges:
 * p equal to element E's draw keeps it, the next float above (not a multiple of 2^-24: the draw is
 * below 1/2) drops it, p = 0 keeps everything. Each element's multiplier is checked against
 * rng_uniform >= p. */
START_TEST(test_dropout_threshold)
{
    enum { D = 64 };
    const uint64_t id = 9, key = 0xabcULL, sk = rng_key(rng_key(key, id), 0);
    int E = 0;
    while (E < D && !(rng_uniform(sk, (uint64_t)E) < 0.5f))
        E++;
    ck_assert_int_lt(E, D);
    float draw = rng_uniform(sk, (uint64_t)E), ps[3] = {draw, nextafterf(draw, 1.0f), 0.0f}, x[D], mask[D];
    for (int t = 0; t < 3; t++) {
        for (int e = 0; e < D; e++)
            x[e] = 1.0f;
        cpu_dropout_forward(x, mask, 1, D, &id, key, 0, ps[t]);
        for (int e = 0; e < D; e++) {
            float want = rng_uniform(sk, (uint64_t)e) >= ps[t] ? 1.0f / (1.0f - ps[t]) : 0.0f;
            ck_assert_msg(mask[e] == want, "p %.9g element %d: mask %g, want %g", (double)ps[t], e, (double)mask[e],
                          (double)want);
        }
        ck_assert_msg((mask[E] != 0.0f) == (t != 1), "p %.9g: element %d kept %d", (double)ps[t], E, mask[E] != 0.0f);
    }
}
END_TEST

/* ---------------------------------------------------------------- BatchNorm */

typedef struct {
    int C;
    size_t count;
    float *x, *gamma, *beta, *y, *r, *mean, *invstd, *rm, *rv, tracked;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    cpu_batchnorm_forward_train(c->x, c->gamma, c->beta, c->y, c->mean, c->invstd, c->rm, c->rv, &c->tracked, c->C,
                                c->count, 0.1f, 1e-5f);
    return dot(c->r, c->y, (size_t)c->C * c->count);
}

/* Training mode: smooth in x, gamma, beta. h = 1e-2 on inputs of spread ~1: truncation error
 * O(h^2) ~ 1e-4 relative, rounding ~1e-5 / 2h; tolerance 2e-3 relative + 2e-4 absolute (gradients
 * are ~0.1-3). Beta's gradient is exactly linear. Running stats and eval mode against formulas. */
START_TEST(test_batchnorm)
{
    bn_ctx c = {3, 20, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0.0f};
    size_t n = 60;
    c.x = random_floats(n, 61, -1, 2), c.gamma = random_floats(3, 62, 0.5f, 1.5f), c.beta = random_floats(3, 63, -1, 1),
    c.r = random_floats(n, 64, -1, 1);
    c.y = zeros(n), c.mean = zeros(3), c.invstd = zeros(3), c.rm = zeros(3), c.rv = zeros(3);
    for (int ch = 0; ch < 3; ch++)
        c.rv[ch] = 1.0f;
    bn_loss(&c);
    for (int ch = 0; ch < 3; ch++) {
        double mu = 0, var = 0;
        for (size_t i = 0; i < 20; i++)
            mu += c.x[ch * 20 + i];
        mu /= 20;
        for (size_t i = 0; i < 20; i++)
            var += (c.x[ch * 20 + i] - mu) * (c.x[ch * 20 + i] - mu);
        var /= 20;
        ck_assert_double_eq_tol(c.rm[ch], 0.1 * mu, 1e-6);
        ck_assert_double_eq_tol(c.rv[ch], 0.9 + 0.1 * var * 20 / 19, 1e-6);
        for (size_t i = 0; i < 20; i++) {
            double want = (c.x[ch * 20 + i] - mu) / sqrt(var + 1e-5) * c.gamma[ch] + c.beta[ch];
            ck_assert_double_eq_tol(c.y[ch * 20 + i], want, 1e-5);
        }
    }
    float *ye = zeros(n);
    cpu_batchnorm_forward_eval(c.x, c.gamma, c.beta, c.rm, c.rv, ye, 3, 20, 1e-5f);
    for (size_t i = 0; i < n; i++) {
        int ch = (int)(i / 20);
        double want = (c.x[i] - c.rm[ch]) / sqrt(c.rv[ch] + 1e-5) * c.gamma[ch] + c.beta[ch];
        ck_assert_double_eq_tol(ye[i], want, 1e-5);
    }
    float *dx = zeros(n), *dg = zeros(3), *dbeta = zeros(3);
    cpu_batchnorm_backward(c.x, c.r, c.gamma, c.mean, c.invstd, dx, dg, dbeta, 3, 20);
    fd_check("bn dx", bn_loss, &c, c.x, dx, n, 0, 1e-2f, 2e-3, 2e-4, 0);
    fd_check("bn dgamma", bn_loss, &c, c.gamma, dg, 3, 0, 1e-2f, 2e-3, 2e-4, 0);
    fd_check("bn dbeta", bn_loss, &c, c.beta, dbeta, 3, 0, 1e-2f, 2e-3, 2e-4, 0);
    /* The input gradient may overwrite dy (the model does this). */
    float *dy = malloc(n * sizeof *dy), *dg2 = zeros(3), *db2 = zeros(3);
    memcpy(dy, c.r, n * sizeof *dy);
    cpu_batchnorm_backward(c.x, dy, c.gamma, c.mean, c.invstd, dy, dg2, db2, 3, 20);
    ck_assert_mem_eq(dy, dx, n * sizeof *dx);
    free(c.x), free(c.gamma), free(c.beta), free(c.y), free(c.r), free(c.mean), free(c.invstd), free(c.rm), free(c.rv),
        free(ye), free(dx), free(dg), free(dbeta), free(dy), free(dg2), free(db2);
}
END_TEST

/* ---------------------------------------------------------------- log-softmax + NLL */

typedef struct {
    float *z, *logp, loss[4];
    uint8_t labels[4];
} nll_ctx;

static double nll_loss(void *p)
{
    nll_ctx *c = p;
    cpu_log_softmax_nll_forward(c->z, c->labels, c->logp, c->loss, 4, 10);
    return 0.7 * cpu_sum_losses(c->loss, 4);
}

/* Loss against the direct formula in double; gradient of 0.7 * sum of losses by differences with
 * h = 1e-2: truncation ~h^2/6 * |third derivative| < 2e-5, rounding of the float loss ~1e-6 / 2h. */
START_TEST(test_log_softmax_nll)
{
    nll_ctx c = {random_floats(40, 71, -3, 3), zeros(40), {0}, {3, 0, 9, 3}};
    double loss = nll_loss(&c) / 0.7, want = 0;
    for (int n = 0; n < 4; n++) {
        double s = 0;
        for (int j = 0; j < 10; j++)
            s += exp(c.z[n * 10 + j]);
        want += log(s) - c.z[n * 10 + c.labels[n]];
    }
    ck_assert_double_eq_tol(loss, want, 1e-5);
    float *dz = zeros(40);
    cpu_log_softmax_nll_backward(c.logp, c.labels, dz, 4, 10, 0.7f);
    fd_check("nll dz", nll_loss, &c, c.z, dz, 40, 0, 1e-2f, 1e-3, 1e-4, 0);
    /* Predictions: sample 1's label 0 made the maximum. */
    c.z[10] = 10.0f;
    ck_assert_int_eq(cpu_count_correct(c.z, c.labels, 4, 10) >= 1, 1);
    long correct = 0;
    for (int n = 0; n < 4; n++) {
        int best = 0;
        for (int j = 1; j < 10; j++)
            best = c.z[n * 10 + j] > c.z[n * 10 + best] ? j : best;
        correct += best == c.labels[n];
    }
    ck_assert_int_eq(cpu_count_correct(c.z, c.labels, 4, 10), correct);
    free(c.z), free(c.logp), free(dz);
}
END_TEST

/* A prediction is the first maximum, as torch.argmax: with the label tied for the maximum it counts when the
 * label comes first, not when another class does; all ten equal is class 0; one above the tie wins. */
START_TEST(test_count_correct_ties)
{
    float z[5 * 10] = {0};
    z[0 * 10 + 2] = z[0 * 10 + 7] = 1.5f; /* label 2: first of the tie */
    z[1 * 10 + 2] = z[1 * 10 + 7] = 1.5f; /* label 7: second of the tie */
    /* sample 2: all ten 0, label 0; sample 3: all ten 0, label 9 */
    z[4 * 10 + 2] = z[4 * 10 + 7] = 1.5f; /* label 9, with 9 just above the tie */
    z[4 * 10 + 9] = 1.5000001f;
    const uint8_t labels[5] = {2, 7, 0, 9, 9};
    const int want[5] = {1, 0, 1, 0, 1};
    for (int n = 0; n < 5; n++)
        ck_assert_msg(cpu_count_correct(z + n * 10, labels + n, 1, 10) == want[n], "sample %d counted %ld", n,
                      cpu_count_correct(z + n * 10, labels + n, 1, 10));
    ck_assert_int_eq(cpu_count_correct(z, labels, 5, 10), 3);
}
END_TEST

/* ---------------------------------------------------------------- whole models */

enum { MN = 3 };
typedef struct {
    model *m;
    float x[MN * 784];
    uint8_t labels[MN];
    uint64_t ids[MN];
} model_ctx;

static double model_loss(void *p)
{
    model_ctx *c = p;
    return model_forward_backward(c->m, c->x, c->labels, c->ids, MN, 77, 1.0f);
}

static void model_setup(model_ctx *c, const char *name, uint64_t seed)
{
    c->m = model_create_on(&nn_cpu, model_kind_of(name), MN);
    ck_assert_ptr_nonnull(c->m);
    model_init_params(c->m, seed);
    random_batch(seed, MN, c->x, c->labels, c->ids);
}

/* End to end through every layer (dropout masks fixed by key and ids, BatchNorm in training mode).
 * ReLU and max-pool kinks are everywhere in a whole network and the loss (a sum of 3 float
 * losses ~7) rounds at ~1e-6, so single random coordinates are unreliable. Per tensor instead:
 * (a) the derivative along the tensor's own gradient direction, a step of L2 length h = 1e-3:
 *     analytic h |g|, numeric from the loss; any error that is not small relative to |g| (wrong
 *     scale, sign, permutation, missing contribution) shows. Over 12 seeds the worst relative
 *     error seen is 1.8%; tolerance 5% + 2e-3 h (the last for convnet's conv biases, whose true
 *     gradient is ~0 because BatchNorm removes them);
 * (b) the coordinate of its largest gradient, h = 1e-3: tolerance 5% + 1e-3, of which 8 seeds of
 *     each model used at most 60%. */
static void model_fd(const char *name, uint64_t seed)
{
    model_ctx c;
    model_setup(&c, name, seed);
    model *m = c.m;
    size_t np = model_num_params(m);
    float *params = model_params(m), *g = malloc(np * sizeof *g), *p0 = malloc(np * sizeof *p0);
    memset(model_grads(m), 0, np * sizeof *g);
    model_loss(&c);
    memcpy(g, model_grads(m), np * sizeof *g);
    memcpy(p0, params, np * sizeof *p0);
    const float h = 1e-3f;
    for (int t = 0; t < model_num_tensors(m); t++) {
        const tensor_desc *d = model_tensor(m, t);
        float *pt = params + d->offset, *gt = g + d->offset;
        size_t best = 0;
        double norm = 0;
        for (size_t i = 0; i < d->count; i++) {
            norm += (double)gt[i] * gt[i];
            if (fabsf(gt[i]) > fabsf(gt[best]))
                best = i;
        }
        norm = sqrt(norm);
        double lpm[2];
        for (int side = 0; side < 2; side++) {
            for (size_t i = 0; i < d->count; i++)
                pt[i] = p0[d->offset + i] + (float)((side ? -h : h) * gt[i] / norm);
            lpm[side] = model_loss(&c);
        }
        memcpy(pt, p0 + d->offset, d->count * sizeof *pt);
        double num = (lpm[0] - lpm[1]) / 2, ana = h * norm;
        ck_assert_msg(fabs(num - ana) <= 5e-2 * fabs(num) + 2e-3 * h,
                      "%s %s: derivative along the gradient: analytic %.7g, numeric %.7g", name, d->name, ana, num);
        fd_check(d->name, model_loss, &c, pt + best, gt + best, 1, 0, h, 5e-2, 1e-3, 0);
    }
    free(g), free(p0);
    model_free(m);
}

START_TEST(test_model_net) { model_fd("net", 5); }
END_TEST

START_TEST(test_model_convnet) { model_fd("convnet", 6); }
END_TEST

int main(void)
{
    Suite *s = suite_create("layers");
    TCase *tc = tcase_create("layers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_sum_add);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_dropout_threshold);
    tcase_add_test(tc, test_batchnorm);
    tcase_add_test(tc, test_log_softmax_nll);
    tcase_add_test(tc, test_count_correct_ties);
    tcase_add_test(tc, test_model_net);
    tcase_add_test(tc, test_model_convnet);
    suite_add_tcase(s, tc);
    return check_run(s);
}
