/* The GPU's per-thread index math (src/kernels.h) against the CPU layers (nn_cpu, src/nn_cpu.c):
 * each kern_* function runs in a plain loop, one call per flat index as a grid-stride loop would,
 * and must agree with the CPU function bit for bit. Destinations start as an all-ones byte pattern
 * (a NaN for floats, -1 for argmaxes, 0xff for labels) in both copies, so an element either side
 * forgets to write, or writes outside its range, shows up as a mismatch or a leftover sentinel. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "layers.h"
#include "nn_cpu.h"
#include "rng.h"
#include "../check_run.h"
#include "model_testutil.h"

/* A buffer of `bytes` all-ones bytes. */
static void *sentinel(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0xff, bytes);
    return p;
}

static int is_sentinel(const void *p, size_t size)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i++)
        if (b[i] != 0xff)
            return 0;
    return 1;
}

/* exp and got agree bit for bit over n elements of `size` bytes, and elements lo .. hi-1 were written. */
static void same(const char *what, const void *exp, const void *got, size_t n, size_t size, size_t lo, size_t hi)
{
    const char *e = exp, *g = got;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(!memcmp(e + i * size, g + i * size, size), "%s[%zu]: kernel differs from CPU", what, i);
        ck_assert_msg(i < lo || i >= hi || !is_sentinel(e + i * size, size), "%s[%zu]: never written", what, i);
    }
}

static void same_floats(const char *what, const float *exp, const float *got, size_t n)
{
    same(what, exp, got, n, sizeof(float), 0, n);
}

/* ---------------------------------------------------------------- gather */

/* Every combination the backend uses: a shuffled index with labels, no index (evaluation over a
 * contiguous range), and no labels. Repeated indices included. */
static void gather_case(int use_idx, int use_y)
{
    enum { M = 9, n = 7 };
    uint8_t *images = malloc((size_t)M * 784), labels[M];
    for (size_t i = 0; i < (size_t)M * 784; i++)
        images[i] = (uint8_t)rng_below(1, i, 256);
    for (int i = 0; i < M; i++)
        labels[i] = (uint8_t)rng_below(2, (uint64_t)i, 10);
    uint64_t idx[n];
    for (int i = 0; i < n; i++)
        idx[i] = rng_below(3, (uint64_t)i, M);
    const uint64_t *ip = use_idx ? idx : NULL;
    size_t nx = (size_t)n * 784;
    float *xe = sentinel(nx * sizeof(float)), *xg = sentinel(nx * sizeof(float));
    uint8_t ye[n], yg[n];
    memset(ye, 0xff, n);
    memset(yg, 0xff, n);
    cpu_gather(images, labels, ip, n, xe, use_y ? ye : NULL);
    for (size_t i = 0; i < nx; i++)
        kern_gather(i, images, labels, ip, xg, use_y ? yg : NULL);
    same_floats("gather x", xe, xg, nx);
    same("gather y", ye, yg, n, 1, 0, use_y ? n : 0);
    free(images);
    free(xe);
    free(xg);
}

START_TEST(test_gather)
{
    gather_case(1, 1);
    gather_case(0, 1);
    gather_case(1, 0);
}
END_TEST

/* ---------------------------------------------------------------- im2col / col2im */

typedef struct {
    int N, C, H, W, k, pad, n0, ns, wide;
} conv_shape;

/* Normal layout: k 3 and 5, pad 0 and 2 (pad 2 with k 3 makes outputs larger than inputs: every
 * border tap reads padding), whole batches and chunks (n0 > 0, ns < N: the sample offset). Wide
 * layout (pad 0 only): odd and even sizes, the MNIST conv1 shape, chunks at the start, middle and
 * end of the batch. */
static const conv_shape shapes[] = {
    {3, 2, 7, 6, 3, 0, 0, 3, 0},   {3, 2, 7, 6, 5, 2, 0, 3, 0},  {4, 3, 6, 5, 3, 2, 1, 2, 0},
    {4, 1, 8, 9, 5, 0, 2, 2, 0},   {5, 2, 5, 7, 5, 2, 4, 1, 0},  {3, 2, 7, 6, 3, 0, 0, 3, 1},
    {5, 3, 8, 8, 5, 0, 1, 3, 1},   {4, 1, 28, 28, 5, 0, 3, 1, 1}, {6, 4, 12, 12, 5, 0, 2, 3, 1},
    {4, 2, 9, 6, 3, 0, 0, 2, 1},
};

static size_t col_count(const conv_shape *s)
{
    int OH = conv_out(s->H, s->k, s->pad), OW = s->wide ? s->W : conv_out(s->W, s->k, s->pad);
    return (size_t)s->C * s->k * s->k * s->ns * OH * OW;
}

START_TEST(test_im2col)
{
    const conv_shape *s = &shapes[_i];
    size_t nx = (size_t)s->C * s->N * s->H * s->W, nc = col_count(s);
    float *x = random_floats(nx, rng_key(10, (uint64_t)_i), -1, 1);
    float *ce = sentinel(nc * sizeof(float)), *cg = sentinel(nc * sizeof(float));
    cpu_im2col(x, ce, s->N, s->C, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    for (size_t i = 0; i < nc; i++)
        kern_im2col(i, x, cg, s->N, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    same_floats("im2col", ce, cg, nc);
    free(x);
    free(ce);
    free(cg);
}
END_TEST

/* Random dcol, junk columns of the wide layout included (both sides add them alike). Only samples
 * n0 .. n0+ns-1 are written: the rest must keep the sentinel on both sides. */
START_TEST(test_col2im)
{
    const conv_shape *s = &shapes[_i];
    size_t HW = (size_t)s->H * s->W, nx = (size_t)s->C * s->N * HW, nc = col_count(s);
    float *dcol = random_floats(nc, rng_key(11, (uint64_t)_i), -1, 1);
    float *de = sentinel(nx * sizeof(float)), *dg = sentinel(nx * sizeof(float));
    cpu_col2im(dcol, de, s->N, s->C, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    for (size_t i = 0; i < (size_t)s->C * s->ns * HW; i++)
        kern_col2im(i, dcol, dg, s->N, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    same("col2im", de, dg, nx, sizeof(float), 0, 0);
    for (size_t i = 0; i < nx; i++) {
        int n = (int)(i / HW % (size_t)s->N), in = n >= s->n0 && n < s->n0 + s->ns;
        ck_assert_msg(in != is_sentinel(&de[i], sizeof(float)), "col2im[%zu] (sample %d): %s", i, n,
                      in ? "never written" : "written outside the chunk");
    }
    free(dcol);
    free(de);
    free(dg);
}
END_TEST

/* ---------------------------------------------------------------- fill */

/* Bias rows of a convolution (by_row, rows ld > cols apart: a chunk of a wider output) and bias
 * columns of a linear layer (by column), with and without a row stride; the gap between rows must
 * stay untouched. */
START_TEST(test_fill)
{
    enum { rows = 5 };
    static const size_t cols[] = {7, 7, 1}, lds[] = {7, 10, 3};
    for (int t = 0; t < 3; t++)
        for (int by_row = 0; by_row < 2; by_row++) {
            size_t n = rows * lds[t];
            float *b = random_floats(by_row ? rows : cols[t], rng_key(12, (uint64_t)t), -1, 1);
            float *ye = sentinel(n * sizeof(float)), *yg = sentinel(n * sizeof(float));
            cpu_fill(ye, b, rows, cols[t], lds[t], by_row);
            for (size_t i = 0; i < rows * cols[t]; i++)
                kern_fill(i, yg, b, cols[t], lds[t], by_row);
            same("fill", ye, yg, n, sizeof(float), 0, 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg((i % lds[t] < cols[t]) != is_sentinel(&ye[i], sizeof(float)), "fill[%zu]", i);
            free(b);
            free(ye);
            free(yg);
        }
}
END_TEST

/* ---------------------------------------------------------------- max-pool */

/* Inputs quantised to a few levels (ties: the first maximum wins) with a NaN now and then (NaN wins);
 * elements outside every window (columns >= 2 (W/2), an odd last row, the ld - W junk columns)
 * hold 1e3, which a kernel reading them would propagate. */
static void maxpool_case(int planes, int H, int W, int ld, uint64_t seed)
{
    int OH = H / 2, OW = W / 2;
    size_t nx = (size_t)planes * H * ld, ny = (size_t)planes * OH * OW;
    float *x = random_floats(nx, rng_key(seed, 1), 0, 4);
    for (size_t i = 0; i < nx; i++) {
        size_t q = i % ((size_t)H * ld);
        int ih = (int)(q / (size_t)ld), iw = (int)(q % (size_t)ld);
        x[i] = (ih >= 2 * OH || iw >= 2 * OW) ? 1e3f : rng_below(seed, i, 61) == 0 ? NAN : (float)(int)x[i];
    }
    float *ye = sentinel(ny * sizeof(float)), *yg = sentinel(ny * sizeof(float));
    int32_t *ae = sentinel(ny * sizeof(int32_t)), *ag = sentinel(ny * sizeof(int32_t));
    cpu_maxpool2_forward(x, ye, ae, planes, H, W, ld);
    for (size_t i = 0; i < ny; i++)
        kern_maxpool2(i, x, yg, ag, H, W, ld);
    same_floats("maxpool y", ye, yg, ny);
    same("maxpool arg", ae, ag, ny, sizeof(int32_t), 0, ny);
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(!(ye[i] > 10.0f), "maxpool y[%zu] = %g read outside its window", i, (double)ye[i]);

    /* Backward with the CPU's argmaxes: every element of dx written, 0 outside the windows. */
    float *dy = random_floats(ny, rng_key(seed, 2), -1, 1);
    float *de = sentinel(nx * sizeof(float)), *dg = sentinel(nx * sizeof(float));
    cpu_maxpool2_backward(dy, ae, de, planes, H, W, ld);
    for (size_t i = 0; i < nx; i++)
        kern_maxpool2_grad(i, dy, ae, dg, H, W, ld);
    same_floats("maxpool dx", de, dg, nx);
    for (size_t i = 0; i < nx; i++)
        if (x[i] == 1e3f)
            ck_assert_msg(de[i] == 0.0f, "maxpool dx[%zu] outside every window = %g", i, (double)de[i]);
    free(x);
    free(ye);
    free(yg);
    free(ae);
    free(ag);
    free(dy);
    free(de);
    free(dg);
}

START_TEST(test_maxpool)
{
    maxpool_case(3, 24, 24, 24, 20); /* the model's shapes, dense rows */
    maxpool_case(3, 24, 24, 26, 21); /* wide rows: a wide convolution's output, k - 1 junk columns */
    maxpool_case(4, 5, 5, 5, 22);    /* odd: last row and column in no window */
    maxpool_case(2, 5, 5, 7, 23);    /* odd and wide */
    maxpool_case(2, 6, 9, 10, 24);   /* even H, odd W, wide */
}
END_TEST

/* ---------------------------------------------------------------- dropout */

/* Mask and scaled x, with non-contiguous sample ids (the global indices of a rank's shard) and
 * two rates. */
START_TEST(test_dropout)
{
    enum { N = 6, D = 50 };
    static const float ps[] = {0.5f, 0.25f};
    uint64_t ids[N];
    for (int n = 0; n < N; n++)
        ids[n] = rng_u64(30, (uint64_t)n) % 60000;
    for (int t = 0; t < 2; t++) {
        float *xe = random_floats((size_t)N * D, rng_key(31, (uint64_t)t), -2, 2), *xg = malloc((size_t)N * D * sizeof *xg);
        memcpy(xg, xe, (size_t)N * D * sizeof *xg);
        float *me = sentinel((size_t)N * D * sizeof(float)), *mg = sentinel((size_t)N * D * sizeof(float));
        cpu_dropout_forward(xe, me, N, D, ids, 0x5eedULL, 2, ps[t]);
        for (size_t i = 0; i < (size_t)N * D; i++)
            kern_dropout(i, xg, mg, D, ids, 0x5eedULL, 2, ps[t]);
        same_floats("dropout mask", me, mg, (size_t)N * D);
        same_floats("dropout x", xe, xg, (size_t)N * D);
        free(xe);
        free(xg);
        free(me);
        free(mg);
    }
}
END_TEST

/* ---------------------------------------------------------------- flatten / unflatten */

/* The transposes before fc1 and after its input gradient: the kernels' gather (flatten) and
 * scatter (unflatten) through kern_cnhw_index, the model's shape and a non-square one. */
static void flatten_case(int C, int N, int HW, uint64_t seed)
{
    size_t n = (size_t)C * N * HW;
    float *x = random_floats(n, rng_key(seed, 1), -1, 1);
    float *ye = sentinel(n * sizeof(float)), *yg = sentinel(n * sizeof(float));
    cpu_flatten_cnhw(x, ye, C, N, HW);
    for (size_t i = 0; i < n; i++)
        yg[i] = x[kern_cnhw_index(i, C, N, HW)];
    same_floats("flatten", ye, yg, n);
    float *xe = sentinel(n * sizeof(float)), *xg = sentinel(n * sizeof(float));
    cpu_unflatten_cnhw(ye, xe, C, N, HW);
    for (size_t i = 0; i < n; i++)
        xg[kern_cnhw_index(i, C, N, HW)] = ye[i];
    same_floats("unflatten", xe, xg, n);
    ck_assert(!memcmp(x, xe, n * sizeof *x)); /* a round trip */
    free(x);
    free(ye);
    free(yg);
    free(xe);
    free(xg);
}

START_TEST(test_flatten)
{
    flatten_case(64, 3, 16, 40);
    flatten_case(3, 5, 7, 41);
    flatten_case(1, 4, 9, 42);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    tcase_add_test(tc, test_gather);
    tcase_add_loop_test(tc, test_im2col, 0, nshapes);
    tcase_add_loop_test(tc, test_col2im, 0, nshapes);
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_flatten);
    suite_add_tcase(s, tc);
    return check_run(s);
}
