/* The GPU's per-thread index math (src/gpu/kernels.h) against the CPU layers (nn_cpu, src/nn/cpu/nn_cpu.c):
 * each kern_* function runs in a plain loop, one call per flat index as a grid-stride loop would,
 * and must agree with the CPU function bit for bit. Destinations start as an all-ones byte pattern
 * (a NaN for floats, -1 for argmaxes, 0xff for labels) in both copies, so an element either side
 * forgets to write, or writes outside its range, shows up as a mismatch or a leftover sentinel. */
#include "../check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels.h"
#include "nn/layers.h"
#include "nn/cpu/nn_cpu.h"
#include "base/rng.h"
#include "model_testutil.h"
#include "kernel_testutil.h"

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
    {3, 2, 7, 6, 3, 0, 0, 3, 0}, {3, 2, 7, 6, 5, 2, 0, 3, 0},   {4, 3, 6, 5, 3, 2, 1, 2, 0},
    {4, 1, 8, 9, 5, 0, 2, 2, 0}, {5, 2, 5, 7, 5, 2, 4, 1, 0},   {3, 2, 7, 6, 3, 0, 0, 3, 1},
    {5, 3, 8, 8, 5, 0, 1, 3, 1}, {4, 1, 28, 28, 5, 0, 3, 1, 1}, {6, 4, 12, 12, 5, 0, 2, 3, 1},
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
        kern_im2col((uint32_t)i, x, cg, s->N, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
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
        kern_col2im((uint32_t)i, dcol, dg, NULL, s->N, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    same("col2im", de, dg, nx, sizeof(float), 0, 0);
    float *relu = random_floats(nx, rng_key(12, (uint64_t)_i), -1, 1); /* about half <= 0 */
    for (size_t i = 0; i < (size_t)s->C * s->ns * HW; i++)
        kern_col2im((uint32_t)i, dcol, dg, relu, s->N, s->H, s->W, s->k, s->pad, s->n0, s->ns, s->wide);
    for (size_t i = 0; i < nx; i++) {
        int n = (int)(i / HW % (size_t)s->N), in = n >= s->n0 && n < s->n0 + s->ns;
        ck_assert_msg(in != is_sentinel(&de[i], sizeof(float)), "col2im[%zu] (sample %d): %s", i, n,
                      in ? "never written" : "written outside the chunk");
    }
    /* relu_backward of what col2im wrote: each channel's chunk is contiguous. One call per chunk, not per
     * element: each call is an OpenMP region, and thousands of them time out on a busy machine. */
    for (int c = 0; c < s->C; c++) {
        size_t at = ((size_t)c * s->N + s->n0) * HW;
        cpu_relu_backward(&de[at], &relu[at], (size_t)s->ns * HW);
    }
    same("col2im, then the ReLU's backward", de, dg, nx, sizeof(float), 0, 0);
    free(relu);
    free(dcol);
    free(de);
    free(dg);
}
END_TEST

/* The 32-bit index limit of im2col/col2im: the largest sample count whose column buffer has at most
 * 2^32 - 1 elements passes, one more does not (net's conv2, wide: 32 x 9 x 24 x 26 per sample). */
START_TEST(test_conv_fits32)
{
    size_t per = 32 * 9 * 24 * 26;
    int most = (int)(UINT32_MAX / per);
    ck_assert(kern_conv_fits32(32, 26, 26, 3, 0, most, 1));
    ck_assert(!kern_conv_fits32(32, 26, 26, 3, 0, most + 1, 1));
    ck_assert(kern_conv_fits32(1, 28, 28, 3, 0, 4096, 0));
}
END_TEST

/* ---------------------------------------------------------------- conv1 in one pass */

/* U(lo, hi) rounded to eighths: every product and partial sum of a convolution is exact in fp32, so any
 * order of the taps gives the same bits (the GPU's direct kernel sums them in another order than the GEMM). */
static float *eighths(size_t n, uint64_t key, float lo, float hi)
{
    float *v = random_floats(n, key, lo, hi);
    for (size_t i = 0; i < n; i++)
        v[i] = roundf(v[i] * 8.0f) / 8.0f;
    return v;
}

/* net's conv1 shape, and padding that makes every border tap read zeros (convnet's conv1 has pad 2, k 5). */
typedef struct {
    int N, H, W, F, k, pad;
} conv1_case;
static const conv1_case conv1_cases[] = {{3, 28, 28, 5, 3, 0}, {2, 9, 13, 4, 5, 2}};
enum { CONV1_CASES = sizeof conv1_cases / sizeof conv1_cases[0] };

/* kern_conv1_bias_relu against the CPU's im2col, GEMM and bias_relu_forward (conv_bias_relu_forward on
 * nn_cpu). */
START_TEST(test_conv1_bias_relu)
{
    const conv1_case *c = conv1_cases;
    int N = c[_i].N, H = c[_i].H, W = c[_i].W, F = c[_i].F, k = c[_i].k, pad = c[_i].pad;
    size_t P = conv_plane(H, W, k, pad, 0), ny = (size_t)F * N * P;
    float *x = eighths((size_t)N * H * W, rng_key(12, (uint64_t)_i), -2, 2);
    float *w = eighths((size_t)F * k * k, rng_key(13, (uint64_t)_i), -1, 1);
    float *b = eighths((size_t)F, rng_key(14, (uint64_t)_i), -1, 1);
    float *col = malloc((size_t)k * k * N * P * sizeof(float));
    float *ye = sentinel(ny * sizeof(float)), *yg = sentinel(ny * sizeof(float));
    conv_bias_relu_forward(&nn_cpu, x, w, b, ye, N, 1, H, W, F, k, pad, col, N, 0);
    for (size_t i = 0; i < ny; i++)
        yg[i] = kern_conv1_bias_relu((uint32_t)i, x, w, b, N, H, W, k, pad);
    same_floats("conv1 bias relu", ye, yg, ny);
    size_t zeros = 0;
    for (size_t i = 0; i < ny; i++)
        zeros += yg[i] == 0.0f;
    ck_assert_msg(zeros > 0 && zeros < ny, "ReLU: %zu zeros of %zu", zeros, ny); /* both sides of it seen */
    free(x), free(w), free(b), free(col), free(ye), free(yg);
}
END_TEST

/* Its gradients: kern_lane_conv1_grad over every slice and lane as the GPU's grid runs it (lanes added in
 * index order here, in a tree there: on these exact inputs any order gives the same bits), then
 * kern_conv1_grad_finish, against the CPU's sum_add, im2col and GEMM (conv_backward on nn_cpu). dw and db
 * start nonzero: both add. */
START_TEST(test_conv1_grad)
{
    const conv1_case *c = conv1_cases;
    int N = c[_i].N, H = c[_i].H, W = c[_i].W, F = c[_i].F, k = c[_i].k, pad = c[_i].pad, FK = F * k * k;
    size_t P = conv_plane(H, W, k, pad, 0), count = (size_t)N * P;
    int sums = FK + F, slices = kern_red_slices(sums, count);
    float *x = eighths((size_t)N * H * W, rng_key(15, (uint64_t)_i), -2, 2);
    float *dy = eighths((size_t)F * count, rng_key(16, (uint64_t)_i), -1, 1);
    float *dwe = eighths((size_t)FK, rng_key(17, (uint64_t)_i), -1, 1),
          *dbe = eighths((size_t)F, rng_key(18, 0), -1, 1);
    float *dwg = malloc((size_t)FK * sizeof(float)), *dbg = malloc((size_t)F * sizeof(float));
    memcpy(dwg, dwe, (size_t)FK * sizeof(float));
    memcpy(dbg, dbe, (size_t)F * sizeof(float));
    float *col = malloc((size_t)k * k * count * sizeof(float));
    conv_backward(&nn_cpu, x, NULL, dy, dwe, dbe, NULL, N, 1, H, W, F, k, pad, col, N, 0);
    double *part = malloc((size_t)sums * slices * sizeof(double));
    for (int ch = 0; ch < sums; ch++)
        for (int sl = 0; sl < slices; sl++) {
            size_t lo, hi;
            op_slice(count, slices, sl, &lo, &hi);
            double sum = 0.0;
            for (unsigned lane = 0; lane < KERN_LANES; lane++)
                sum += kern_lane_conv1_grad((uint32_t)ch, x, dy, lo, hi, N, H, W, F, k, pad, lane);
            part[(size_t)ch * slices + sl] = sum;
        }
    for (int ch = 0; ch < sums; ch++)
        kern_conv1_grad_finish((size_t)ch, part, slices, dwg, dbg, FK);
    same_floats("conv1 weight gradient", dwe, dwg, (size_t)FK);
    same_floats("conv1 bias gradient", dbe, dbg, (size_t)F);
    free(x), free(dy), free(dwe), free(dbe), free(dwg), free(dbg), free(col), free(part);
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
        yg[i] = kern_maxpool2_at(i, x, ag, H, W, ld);
    same_floats("maxpool y", ye, yg, ny);
    same("maxpool arg", ae, ag, ny, sizeof(int32_t), 0, ny);
    for (size_t i = 0; i < ny; i++)
        ck_assert_msg(!(ye[i] > 10.0f), "maxpool y[%zu] = %g read outside its window", i, (double)ye[i]);

    /* Backward with the CPU's argmaxes: every element of dx written, 0 outside the windows. */
    float *dy = random_floats(ny, rng_key(seed, 2), -1, 1);
    float *de = sentinel(nx * sizeof(float)), *dg = sentinel(nx * sizeof(float));
    cpu_maxpool2_backward(dy, ae, de, planes, H, W, ld);
    for (size_t i = 0, o; i < nx; i++)
        dg[i] = kern_maxpool2_src(i, ae, H, W, ld, &o) ? dy[o] : 0.0f;
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
        float *xe = random_floats((size_t)N * D, rng_key(31, (uint64_t)t), -2, 2),
              *xg = malloc((size_t)N * D * sizeof *xg);
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

/* ---------------------------------------------------------------- per-channel reductions */

/* The GPU's per-channel reductions (src/gpu/cuda/nn_cuda.cu) replayed on the CPU: every block (c, s) of the 2-D
 * grid runs its lanes (kern_lane_*) and adds them in block_sum's tree (part[t] += part[t + h] for t < h,
 * h = KERN_LANES/2 .. 1; the only GPU code not shared through kernels.h), then the second pass
 * (kern_*_finish) and the elementwise pass. Compared with the CPU backend (op_sum, op_bn_stats and
 * op_bn_grad_sums add in another order) within bounds derived from double rounding, u = 2^-53: two sums of
 * count terms t in double each err by at most count u sum|t|, so they differ by at most 2 count u sum|t|;
 * a float rounded from either differs by at most 1 ulp more, and one rounded twice (out[c] += (float)s) by
 * 1 ulp of s and 1 of the result more. */
#define U53   0x1p-53
#define ULP24 0x1p-23 /* an ulp of a float, relative */

static void near(const char *what, size_t i, double ref, double got, double bound)
{
    ck_assert_msg(fabs(got - ref) <= bound, "%s[%zu]: cpu %.17g, gpu %.17g, |diff| %.3g > bound %.3g", what, i, ref,
                  got, fabs(got - ref), bound);
}

/* sum_add as k_sum_part + k_sum_finish compute it; sliced[c] gets the double sum before rounding. */
static void gpu_sum_add(float *out, const float *x, int channels, size_t count, size_t cstride, size_t stride,
                        double *sliced)
{
    int slices = kern_red_slices(channels, count);
    double *part = malloc((size_t)channels * slices * sizeof *part), lane[KERN_LANES];
    for (int c = 0; c < channels; c++)
        for (int s = 0; s < slices; s++) {
            size_t lo, hi;
            op_slice(count, slices, s, &lo, &hi);
            for (unsigned l = 0; l < KERN_LANES; l++)
                lane[l] = kern_lane_sum(x + (size_t)c * cstride, lo, hi, stride, l);
            part[(size_t)c * slices + s] = tree(lane);
        }
    for (int c = 0; c < channels; c++) {
        sliced[c] = op_partials_sum(part + (size_t)c * slices, slices);
        kern_sum_finish((size_t)c, part, slices, out);
    }
    free(part);
}

/* Bias gradients: CNHW planes (cstride > count) and columns of [N][F] (stride F); many slices, a few,
 * and one. The sliced double sum against a plain one, and the result against cpu_sum_add. */
START_TEST(test_sum_add_sliced)
{
    static const struct {
        int channels;
        size_t count, cstride, stride;
        int slices; /* kern_red_slices' choice, so each case tests what it says */
    } cases[] = {{3, 43269, 43300, 1, 42}, {10, 5000, 1, 10, 4}, {7, 301, 400, 1, 1}};
    for (int t = 0; t < 3; t++) {
        int C = cases[t].channels;
        size_t count = cases[t].count, cs = cases[t].cstride, st = cases[t].stride;
        ck_assert_int_eq(kern_red_slices(C, count), cases[t].slices);
        size_t n = (size_t)(C - 1) * cs + (count - 1) * st + 1;
        float *x = random_floats(n, rng_key(50, (uint64_t)t), -1, 3), *oc = random_floats(C, 51, -2, 2);
        float *og = malloc(C * sizeof *og);
        double *sliced = malloc(C * sizeof *sliced);
        memcpy(og, oc, C * sizeof *og);
        cpu_sum_add(oc, x, C, count, cs, st);
        gpu_sum_add(og, x, C, count, cs, st, sliced);
        for (int c = 0; c < C; c++) {
            double plain = 0.0, abs = 0.0;
            for (size_t j = 0; j < count; j++) {
                plain += x[(size_t)c * cs + j * st];
                abs += fabs(x[(size_t)c * cs + j * st]);
            }
            double e = 2.0 * (double)count * U53 * abs, r = fabs(plain) + fabs((double)oc[c]);
            near("sliced sum vs plain double sum", (size_t)c, plain, sliced[c], e);
            near("sum_add vs cpu_sum_add", (size_t)c, oc[c], og[c], e + ULP24 * r);
        }
        free(x), free(oc), free(og), free(sliced);
    }
}
END_TEST

/* batchnorm_forward_train and batchnorm_backward as the CUDA backend computes them (group of all channels). */
static void gpu_bn_train(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *invstd,
                         float *rmean, float *rvar, float *tracked, int C, size_t count)
{
    int slices = kern_red_slices(C, count);
    double *sum = malloc((size_t)C * slices * sizeof *sum), *m2 = malloc((size_t)C * slices * sizeof *m2);
    double lane[KERN_LANES];
    for (int c = 0; c < C; c++)
        for (int s = 0; s < slices; s++) {
            size_t lo, hi, i = (size_t)c * slices + s;
            op_slice(count, slices, s, &lo, &hi);
            for (unsigned l = 0; l < KERN_LANES; l++)
                lane[l] = kern_lane_sum(x + c * count, lo, hi, 1, l);
            sum[i] = tree(lane);
            for (unsigned l = 0; l < KERN_LANES; l++)
                lane[l] = kern_lane_sqdev(x + c * count, lo, hi, sum[i] / (double)(hi - lo), l);
            m2[i] = tree(lane);
        }
    for (int c = 0; c < C; c++) /* k_bn_apply: each block (c, s) its own second pass, then its slice */
        for (int s = 0; s < slices; s++) {
            size_t lo, hi;
            float st[2];
            op_slice(count, slices, s, &lo, &hi);
            kern_bn_stats_finish((size_t)c, sum, m2, slices, count, 0.1f, 1e-5f, st, s == 0, mean, invstd, rmean, rvar,
                                 tracked);
            for (size_t j = lo; j < hi; j++)
                y[c * count + j] = op_bn(x[c * count + j], st[0], st[1], gamma[c], beta[c]);
        }
    free(sum), free(m2);
}

static void gpu_bn_backward(const float *x, const float *dy, const float *gamma, const float *mean, const float *invstd,
                            float *dx, float *dgamma, float *dbeta, int C, size_t count)
{
    int slices = kern_red_slices(C, count);
    double *pa = malloc((size_t)C * slices * sizeof *pa), *pb = malloc((size_t)C * slices * sizeof *pb);
    double la[KERN_LANES], lb[KERN_LANES];
    for (int c = 0; c < C; c++)
        for (int s = 0; s < slices; s++) {
            size_t lo, hi;
            op_slice(count, slices, s, &lo, &hi);
            for (unsigned l = 0; l < KERN_LANES; l++)
                kern_lane_bn_grad(x + c * count, dy + c * count, lo, hi, mean[c], invstd[c], l, &la[l], &lb[l]);
            pa[(size_t)c * slices + s] = tree(la);
            pb[(size_t)c * slices + s] = tree(lb);
        }
    for (int c = 0; c < C; c++) /* k_bn_grad_apply, as k_bn_apply */
        for (int s = 0; s < slices; s++) {
            size_t lo, hi;
            float st[2];
            op_slice(count, slices, s, &lo, &hi);
            kern_bn_grad_finish((size_t)c, pa, pb, slices, count, st, s == 0, dgamma, dbeta);
            for (size_t j = lo; j < hi; j++)
                dx[c * count + j] =
                    op_bn_grad(x[c * count + j], dy[c * count + j], mean[c], invstd[c], gamma[c], st[0], st[1]);
        }
    free(pa), free(pb);
}

/* Elementwise outputs computed by the same float operations from per-channel values that differ by at
 * most an ulp or two: within 2^-20 (8 ulps) of the channel's largest. */
static void near_planes(const char *what, const float *ref, const float *got, int C, size_t count)
{
    for (int c = 0; c < C; c++) {
        double big = 0.0;
        for (size_t j = 0; j < count; j++)
            big = fmax(big, fabs(ref[c * count + j]));
        for (size_t j = 0; j < count; j++)
            near(what, c * count + j, ref[c * count + j], got[c * count + j], 0x1p-20 * big);
    }
}

/* Channels whose mean is 20 standard deviations from 0 (where a one-pass variance would cancel), many
 * slices per channel (count 40037: 39) and one (count 300). Per-channel values within 2 ulps. */
START_TEST(test_batchnorm_sliced)
{
    static const struct {
        int C;
        size_t count;
        int slices;
    } cases[] = {{2, 40037, 39}, {5, 300, 1}};
    for (int t = 0; t < 2; t++) {
        int C = cases[t].C;
        size_t count = cases[t].count, n = (size_t)C * count;
        ck_assert_int_eq(kern_red_slices(C, count), cases[t].slices);
        float *x = random_floats(n, rng_key(60, (uint64_t)t), 19, 21), *g = random_floats(C, 61, 0.5f, 1.5f);
        float *b = random_floats(C, 62, -0.5f, 0.5f), *dy = random_floats(n, 63, -1, 1);
        float *v[2][8]; /* y, mean, invstd, rmean, rvar, tracked, dgamma, dbeta; [0] cpu, [1] gpu */
        for (int d = 0; d < 2; d++) {
            v[d][0] = malloc(n * sizeof(float));
            for (int k = 1; k < 8; k++)
                v[d][k] = random_floats(C, 64 + (uint64_t)k, 0.5f, 1.5f); /* the same start on both */
        }
        cpu_batchnorm_forward_train(x, g, b, v[0][0], v[0][1], v[0][2], v[0][3], v[0][4], v[0][5], C, count, 0.1f,
                                    1e-5f);
        gpu_bn_train(x, g, b, v[1][0], v[1][1], v[1][2], v[1][3], v[1][4], v[1][5], C, count);
        static const char *names[] = {"y", "mean", "invstd", "running_mean", "running_var", "tracked"};
        near_planes("batchnorm y", v[0][0], v[1][0], C, count);
        for (int k = 1; k < 6; k++)
            for (int c = 0; c < (k == 5 ? 1 : C); c++)
                near(names[k], (size_t)c, v[0][k][c], v[1][k][c], 2.0 * ULP24 * fabs(v[0][k][c]));
        /* Backward from the CPU's statistics on both, dx in place of a copy of dy on each. */
        float *dx[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
        memcpy(dx[0], dy, n * sizeof(float));
        memcpy(dx[1], dy, n * sizeof(float));
        cpu_batchnorm_backward(x, dx[0], g, v[0][1], v[0][2], dx[0], v[0][6], v[0][7], C, count);
        gpu_bn_backward(x, dx[1], g, v[0][1], v[0][2], dx[1], v[1][6], v[1][7], C, count);
        near_planes("batchnorm dx", dx[0], dx[1], C, count);
        for (int c = 0; c < C; c++) {
            double a = 0.0, p = 0.0, sa = 0.0, sp = 0.0; /* sum dy, sum dy xhat, and of their |terms| */
            for (size_t j = 0; j < count; j++) {
                double term = (double)dy[c * count + j] * (double)((x[c * count + j] - v[0][1][c]) * v[0][2][c]);
                a += dy[c * count + j];
                p += term;
                sa += fabs(dy[c * count + j]);
                sp += fabs(term);
            }
            double ea = 2.0 * count * U53 * sa, ep = 2.0 * count * U53 * sp;
            near("dgamma", (size_t)c, v[0][6][c], v[1][6][c], ep + ULP24 * (fabs(p) + fabs(v[0][6][c])));
            near("dbeta", (size_t)c, v[0][7][c], v[1][7][c], ea + ULP24 * (fabs(a) + fabs(v[0][7][c])));
        }
        for (int d = 0; d < 2; d++) {
            for (int k = 0; k < 8; k++)
                free(v[d][k]);
            free(dx[d]);
        }
        free(x), free(g), free(b), free(dy);
    }
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
    tcase_add_test(tc, test_conv_fits32);
    tcase_add_loop_test(tc, test_conv1_bias_relu, 0, CONV1_CASES);
    tcase_add_loop_test(tc, test_conv1_grad, 0, CONV1_CASES);
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_flatten);
    tcase_add_test(tc, test_sum_add_sliced);
    tcase_add_test(tc, test_batchnorm_sliced);
    suite_add_tcase(s, tc);
    return check_run(s);
}
