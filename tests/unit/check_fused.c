/* The GPU's fused kernel bodies (kernels.h: kern_maxpool2_relu, kern_relu_maxpool2_grad, kern_flatten_dropout,
 * kern_dropout_unflatten), one call per flat index as a grid-stride loop makes them, against the unfused pairs of
 * CPU layers they replace (nn_cpu.h), bit for bit; and the CPU's fused entries (cpu_maxpool2_relu_forward...)
 * against the same pairs. Shapes odd on purpose: an odd last row and column in no window, rows longer than
 * the used columns, channel and sample counts that are not powers of two. Inputs hold ties, NaNs, negative
 * values and signed zeros, so the ReLU and the pool's first-maximum rule both matter. The pool on oneDNN's
 * blocked layout (nchw16c.h) against the CPU's fused entries too. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/cpu/nchw16c.h"
#include "base/rng.h"
#include "../check_run.h"
#include "kernel_testutil.h"
#include "model_testutil.h"

static float *copy_floats(const float *x, size_t n)
{
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* Values from a few levels in [-2, 2] (ties), with a NaN now and then, and -0.0 in place of 0. */
static float *levels(size_t n, uint64_t seed)
{
    float *x = random_floats(n, rng_key(seed, 1), -2, 3);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_below(seed, i, 53) == 0 ? NAN : (int)floorf(x[i]) == 0 ? -0.0f : floorf(x[i]);
    return x;
}

typedef struct {
    int C, N, H, W, ld, bias;
} pool_shape;

static const pool_shape pools[] = {
    {3, 5, 7, 5, 8, 1},    /* odd H and W, rows of 8: net's pool with a bias */
    {2, 3, 6, 9, 9, 0},    /* even H, odd W, no bias (convnet's) */
    {5, 1, 5, 5, 5, 1},    /* one sample */
    {4, 3, 24, 24, 26, 1}, /* net's conv2: 24x24 in rows of 26 */
};

/* Forward then backward of pool + ReLU, fused kernel body against the CPU pair (and the CPU's fused entry). */
START_TEST(test_pool_relu)
{
    const pool_shape *s = &pools[_i];
    int planes = s->C * s->N;
    size_t nx = (size_t)planes * s->H * s->ld, ny = (size_t)planes * (s->H / 2) * (s->W / 2);
    float *x = levels(nx, 40 + (uint64_t)_i), *b = s->bias ? random_floats((size_t)s->C, 41, -1.5f, 1.5f) : NULL;
    float *ye = sentinel(ny * sizeof(float)), *yg = sentinel(ny * sizeof(float)), *yc = sentinel(ny * sizeof(float));
    int32_t *ae = sentinel(ny * sizeof(int32_t)), *ag = sentinel(ny * sizeof(int32_t));
    int32_t *ac = sentinel(ny * sizeof(int32_t));
    cpu_maxpool2_forward(x, ye, ae, planes, s->H, s->W, s->ld);
    if (b)
        cpu_bias_relu_forward(ye, b, s->C, ny / (size_t)s->C);
    else
        cpu_relu_forward(ye, ny);
    for (size_t i = 0; i < ny; i++)
        kern_maxpool2_relu(i, x, b, yg, ag, s->N, s->H, s->W, s->ld);
    cpu_maxpool2_relu_forward(x, b, yc, ac, s->C, s->N, s->H, s->W, s->ld);
    same_floats("pool + relu: kernel y", ye, yg, ny);
    same("pool + relu: kernel arg", ae, ag, ny, sizeof(int32_t), 0, ny);
    same_floats("pool + relu: cpu y", ye, yc, ny);
    same("pool + relu: cpu arg", ae, ac, ny, sizeof(int32_t), 0, ny);

    float *dy = levels(ny, 50 + (uint64_t)_i), *dyc = copy_floats(dy, ny), *dyk = copy_floats(dy, ny);
    float *de = sentinel(nx * sizeof(float)), *dg = sentinel(nx * sizeof(float)), *dc = sentinel(nx * sizeof(float));
    cpu_relu_backward(dy, ye, ny);
    cpu_maxpool2_backward(dy, ae, de, planes, s->H, s->W, s->ld);
    for (size_t i = 0; i < nx; i++)
        kern_relu_maxpool2_grad(i, dyk, ye, ae, dg, s->H, s->W, s->ld);
    cpu_relu_maxpool2_backward(dyc, ye, ae, dc, planes, s->H, s->W, s->ld);
    same_floats("relu + pool backward: kernel dx", de, dg, nx);
    same_floats("relu + pool backward: cpu dx", de, dc, nx);
    free(x), free(b), free(ye), free(yg), free(yc), free(ae), free(ag), free(ac);
    free(dy), free(dyc), free(dyk), free(de), free(dg), free(dc);
}
END_TEST

static const pool_shape blocked_pools[] = {
    {16, 3, 7, 5, 8, 1},    /* odd H and W, rows of 8 */
    {32, 2, 6, 9, 9, 0},    /* no bias, dense rows */
    {64, 2, 24, 24, 26, 1}, /* net's conv2 */
};

/* Element (c, n, h, w) of planes [C][N][H] with rows of ld, in nchw16c.h's layout. */
static size_t blocked_index(const pool_shape *s, int c, int n, int h, int w)
{
    size_t pixel = (((size_t)n * (s->C / CHANNEL_BLOCK) + c / CHANNEL_BLOCK) * s->H + h) * s->W + w;
    return pixel * CHANNEL_BLOCK + c % CHANNEL_BLOCK;
}

/* CNHW rows of ld <-> the blocked layout; junk columns (w >= W) come back as zeros. */
static void convert_blocked(const pool_shape *s, float *cnhw, float *blocked, int to_blocked)
{
    for (int c = 0; c < s->C; c++)
        for (int n = 0; n < s->N; n++)
            for (int h = 0; h < s->H; h++)
                for (int w = 0; w < s->ld; w++) {
                    float *v = &cnhw[(((size_t)c * s->N + n) * s->H + h) * s->ld + w];
                    if (w >= s->W)
                        *v = to_blocked ? *v : 0.0f;
                    else if (to_blocked)
                        blocked[blocked_index(s, c, n, h, w)] = *v;
                    else
                        *v = blocked[blocked_index(s, c, n, h, w)];
                }
}

/* Pool + ReLU forward and backward on the blocked layout against the CPU's fused entries on CNHW. */
START_TEST(test_pool_nchw16c)
{
    const pool_shape *s = &blocked_pools[_i];
    int planes = s->C * s->N;
    size_t nx = (size_t)planes * s->H * s->ld, nb = (size_t)planes * s->H * s->W;
    size_t ny = (size_t)planes * (s->H / 2) * (s->W / 2);
    float *x = levels(nx, 70 + (uint64_t)_i), *b = s->bias ? random_floats((size_t)s->C, 71, -1.5f, 1.5f) : NULL;
    float *xb = sentinel(nb * sizeof(float));
    convert_blocked(s, x, xb, 1);
    float *yc = sentinel(ny * sizeof(float)), *yb = sentinel(ny * sizeof(float));
    int32_t *ac = sentinel(ny * sizeof(int32_t)), *ab = sentinel(ny * sizeof(int32_t));
    cpu_maxpool2_relu_forward(x, b, yc, ac, s->C, s->N, s->H, s->W, s->ld);
    nchw16c_maxpool2_relu_forward(xb, b, yb, ab, s->C, s->N, s->H, s->W, s->ld);
    same_floats("blocked pool + relu: y", yc, yb, ny);
    same("blocked pool + relu: arg", ac, ab, ny, sizeof(int32_t), 0, ny);

    float *dy = levels(ny, 80 + (uint64_t)_i), *dyc = copy_floats(dy, ny), *dyb = copy_floats(dy, ny);
    float *dc = sentinel(nx * sizeof(float)), *dxb = sentinel(nb * sizeof(float)), *db = sentinel(nx * sizeof(float));
    cpu_relu_maxpool2_backward(dyc, yc, ac, dc, planes, s->H, s->W, s->ld);
    nchw16c_relu_maxpool2_backward(dyb, yc, ac, dxb, s->C, s->N, s->H, s->W, s->ld);
    convert_blocked(s, db, dxb, 0);
    same_floats("blocked relu + pool backward: dx", dc, db, nx);
    same_floats("blocked relu + pool backward: dy left as it was", dy, dyb, ny);
    free(x), free(b), free(xb), free(yc), free(yb), free(ac), free(ab);
    free(dy), free(dyc), free(dyb), free(dc), free(dxb), free(db);
}
END_TEST

/* The ReLU's gradient from the blocked layout into CNHW against cpu_relu_backward on CNHW: pixel counts with
 * and without a partial last tile (net's conv1 output, 26 x 26). */
START_TEST(test_relu_nchw16c)
{
    static const pool_shape shapes[] = {{16, 3, 7, 5, 5, 0}, {32, 2, 26, 26, 26, 0}};
    const pool_shape *s = &shapes[_i];
    int HW = s->H * s->W;
    size_t n = (size_t)s->C * s->N * HW;
    float *dy = levels(n, 100 + (uint64_t)_i), *y = levels(n, 110 + (uint64_t)_i), *dyb = sentinel(n * sizeof(float));
    convert_blocked(s, dy, dyb, 1);
    float *got = sentinel(n * sizeof(float));
    nchw16c_relu_backward(dyb, y, got, s->C, s->N, HW);
    cpu_relu_backward(dy, y, n);
    same_floats("relu backward from nChw16c", dy, got, n);
    free(dy), free(y), free(dyb), free(got);
}
END_TEST

typedef struct {
    int C, N, HW, dropout;
    float p;
} flat_shape;

static const flat_shape flats[] = {
    {3, 5, 7, 1, 0.25f}, /* net's first dropout rate */
    {2, 7, 9, 1, 0.5f},
    {5, 3, 11, 0, 0.0f},    /* no dropout: evaluation, convnet */
    {64, 3, 144, 1, 0.25f}, /* net's shape */
};

/* Flatten + dropout and its backward, fused kernel bodies against the CPU pairs (and the CPU's fused entries). */
START_TEST(test_flatten_dropout)
{
    const flat_shape *s = &flats[_i];
    size_t n = (size_t)s->C * s->N * s->HW;
    uint64_t key = 0x5eedULL + (uint64_t)_i, *ids = malloc((size_t)s->N * sizeof *ids);
    for (int k = 0; k < s->N; k++)
        ids[k] = rng_u64(60, (uint64_t)k) % 60000;
    float *x = random_floats(n, rng_key(61, (uint64_t)_i), -1, 1);
    float *ye = sentinel(n * sizeof(float)), *yg = sentinel(n * sizeof(float)), *yc = sentinel(n * sizeof(float));
    float *me = NULL, *mg = NULL, *mc = NULL;
    if (s->dropout) {
        me = sentinel(n * sizeof(float)), mg = sentinel(n * sizeof(float)), mc = sentinel(n * sizeof(float));
    }
    cpu_flatten_cnhw(x, ye, s->C, s->N, s->HW);
    if (me)
        cpu_dropout_forward(ye, me, s->N, s->C * s->HW, ids, key, 0, s->p);
    for (size_t i = 0; i < n; i++)
        kern_flatten_dropout(i, x, yg, mg, s->C, s->N, s->HW, ids, key, 0, s->p);
    cpu_flatten_dropout_forward(x, yc, mc, s->C, s->N, s->HW, ids, key, 0, s->p);
    same_floats("flatten + dropout: kernel y", ye, yg, n);
    same_floats("flatten + dropout: cpu y", ye, yc, n);
    if (me) {
        same_floats("flatten + dropout: kernel mask", me, mg, n);
        same_floats("flatten + dropout: cpu mask", me, mc, n);
    }

    float *dy = random_floats(n, rng_key(62, (uint64_t)_i), -1, 1);
    float *dyc = copy_floats(dy, n), *dyk = copy_floats(dy, n);
    float *de = sentinel(n * sizeof(float)), *dg = sentinel(n * sizeof(float)), *dc = sentinel(n * sizeof(float));
    if (me)
        cpu_dropout_backward(dy, me, n);
    cpu_unflatten_cnhw(dy, de, s->C, s->N, s->HW);
    for (size_t i = 0; i < n; i++)
        kern_dropout_unflatten(i, dyk, me, dg, s->C, s->N, s->HW);
    cpu_dropout_unflatten_backward(dyc, me, dc, s->C, s->N, s->HW);
    same_floats("dropout + unflatten backward: kernel dx", de, dg, n);
    same_floats("dropout + unflatten backward: cpu dx", de, dc, n);
    free(ids), free(x), free(ye), free(yg), free(yc), free(me), free(mg), free(mc);
    free(dy), free(dyc), free(dyk), free(de), free(dg), free(dc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("fused");
    tcase_add_loop_test(tc, test_pool_relu, 0, (int)(sizeof pools / sizeof pools[0]));
    tcase_add_loop_test(tc, test_pool_nchw16c, 0, (int)(sizeof blocked_pools / sizeof blocked_pools[0]));
    tcase_add_loop_test(tc, test_relu_nchw16c, 0, 2);
    tcase_add_loop_test(tc, test_flatten_dropout, 0, (int)(sizeof flats / sizeof flats[0]));
    suite_add_tcase(s, tc);
    return check_run(s);
}
