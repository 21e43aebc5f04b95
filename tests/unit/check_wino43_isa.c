/* wino43's and conv1 direct's AVX2 kernels (a CPU without AVX-512: AMD Zen 2 and 3, older Intel) against
 * their AVX-512 ones, bit for bit: the same operations lane for lane (wino43_v16.h, conv1_direct_v16.h). Only
 * the accumulator counts of a block differ, and those do not change any sum's order. check_conv holds the
 * AVX-512 kernels (and, on a CPU without AVX-512, the AVX2 ones) to the convolution's definition;
 * tests/integration/cpu-avx2.sh runs it and a training with the ISA capped. Built only where the kernels are
 * (oneDNN, x86-64). */
#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/conv1_direct.h"
#include "nn/cpu/wino43_kernels.h"
#include "model_testutil.h"

typedef struct {
    float *U, *Ub, *y, *dx, *part, *dw;
} results;

/* Every kernel of k on one shape: the forward, both weight transforms, the input gradient, one sample's
 * weight-gradient sums and their transform back. */
static results run(const wino43_kernels *k, const float *x, const float *w, const float *b, const float *dy, int C,
                   int S, int F)
{
    int O = S - 2;
    results r = {calloc(E * (size_t)C * F, sizeof(float)),
                 calloc(E * (size_t)C * F, sizeof(float)),
                 calloc((size_t)F * O * O, sizeof(float)),
                 calloc((size_t)C * S * S, sizeof(float)),
                 calloc((size_t)E * (C * F + point_stride(C) + point_stride(F)) + F, sizeof(float)),
                 calloc((size_t)F * C * 9, sizeof(float))};
    k->weights(w, F, C, r.U);
    k->weights_backward(w, F, C, r.Ub);
    k->forward_sample(x, r.U, b, r.y, C, S, S, F);
    k->backward_data_sample(dy, r.Ub, r.dx, C, S, S, F);
    k->wgrad_sample(x, dy, r.part, C, S, S, F);
    k->wgrad_sample(x, dy, r.part, C, S, S, F); /* a second sample adds to the sums */
    k->wgrad_output(r.part, r.dw, C, F);
    return r;
}

/* Whether this CPU runs both ISAs' kernels; says why not. */
static int both_isas(const char *kernels)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
    printf("check_wino43_isa: this CPU lacks AVX-512 (or AVX2): %s AVX2 kernels have nothing to be compared with; "
           "check_conv holds them to the definition here\n",
           kernels);
    return 0;
}

static void same(const float *a, const float *b, size_t n, const char *what, int C, int F)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0, "C %d F %d: %s[%zu]: AVX2 %a, AVX-512 %a", C, F, what,
                      i, (double)a[i], (double)b[i]);
}

/* Shapes: net's conv2 (the products' 6 x 4 and 7 x 2 blocks on AVX-512, 6 x 1 and 7 x 1 on AVX2), a wider one
 * with 8 channel blocks, and 16 and 32 outputs (the 1- and 2-vector blocks). */
START_TEST(test_wino43_avx2_bits)
{
    if (!both_isas("wino43's"))
        return;
    static const int shapes[][3] = {{32, 26, 64}, {128, 10, 128}, {16, 14, 16}, {32, 10, 32}, {64, 18, 48}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], S = shapes[s][1], F = shapes[s][2], O = S - 2;
        float *x = random_floats((size_t)C * S * S, 100 + s, -1, 1),
              *w = random_floats((size_t)F * C * 9, 200 + s, -1, 1);
        float *b = random_floats((size_t)F, 300 + s, -1, 1), *dy = random_floats((size_t)F * O * O, 400 + s, -1, 1);
        results a = run(&wino43_avx2, x, w, b, dy, C, S, F), z = run(&wino43_avx512, x, w, b, dy, C, S, F);
        same(a.U, z.U, E * (size_t)C * F, "U", C, F);
        same(a.Ub, z.Ub, E * (size_t)C * F, "Ub", C, F);
        same(a.y, z.y, (size_t)F * O * O, "y", C, F);
        same(a.dx, z.dx, (size_t)C * S * S, "dx", C, F);
        same(a.dw, z.dw, (size_t)F * C * 9, "dw", C, F);
        same(a.part + (size_t)E * (C * F + point_stride(C) + point_stride(F)),
             z.part + (size_t)E * (C * F + point_stride(C) + point_stride(F)), (size_t)F, "db", C, F);
        float *all[] = {x, w, b, dy, a.U, a.Ub, a.y, a.dx, a.part, a.dw, z.U, z.Ub, z.y, z.dx, z.part, z.dw};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            free(all[i]);
    }
    printf("check_wino43_isa: AVX2 and AVX-512 kernels agree bit for bit on 5 shapes\n");
}
END_TEST

/* conv1 direct on net's conv1 (28 x 28, 32 filters: rows of 26 pixels, a full and a partial vector) and on a
 * plane of 20 x 20 with 16 filters: the forward and its blocks, one part's gradient sums of two samples and
 * of two samples' blocks. */
START_TEST(test_conv1_avx2_bits)
{
    if (!both_isas("conv1 direct's"))
        return;
    static const int shapes[][2] = {{28, 32}, {20, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        enum { N = 2 };
        int S = shapes[s][0], F = shapes[s][1], O = S - 2;
        size_t ny = (size_t)F * N * O * O, nsum = (size_t)F * 10 * 16;
        float *x = random_floats((size_t)N * S * S, 500 + s, -1, 1), *w = random_floats((size_t)F * 9, 600 + s, -1, 1);
        float *b = random_floats((size_t)F, 700 + s, -1, 1), *dy = random_floats(ny, 800 + s, -1, 1);
        const conv1_direct_kernels *k[2] = {&conv1_direct_avx2, &conv1_direct_avx512};
        float *y[2], *h[2], *sums[2], *part[2];
        for (int i = 0; i < 2; i++) {
            y[i] = calloc(ny, sizeof(float)), h[i] = calloc(ny, sizeof(float));
            sums[i] = calloc(nsum, sizeof(float)), part[i] = calloc(nsum, sizeof(float));
            for (int n = 0; n < N; n++) {
                const float *xn = x + (size_t)n * S * S;
                float *hn = h[i] + (size_t)n * F * O * O;
                k[i]->forward_sample(xn, w, b, y[i], N, n, S, S, F);
                k[i]->backward_sample(xn, dy, sums[i], N, n, S, S, F);
                k[i]->blocks_sample(xn, w, b, hn, S, S, F);
                k[i]->wgrad_blocks_sample(xn, dy + (size_t)n * F * O * O, hn, part[i], S, S, F);
            }
        }
        same(y[0], y[1], ny, "conv1 y", 1, F);
        same(h[0], h[1], ny, "conv1 blocks", 1, F);
        same(sums[0], sums[1], nsum, "conv1 sums", 1, F);
        same(part[0], part[1], (size_t)F * 10, "conv1 blocks' sums", 1, F);
        for (int i = 0; i < 2; i++)
            free(y[i]), free(h[i]), free(sums[i]), free(part[i]);
        free(x), free(w), free(b), free(dy);
    }
    printf("check_wino43_isa: conv1's AVX2 and AVX-512 kernels agree bit for bit on 2 shapes\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wino43_isa");
    TCase *tc = tcase_create("wino43_isa");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_wino43_avx2_bits);
    tcase_add_test(tc, test_conv1_avx2_bits);
    suite_add_tcase(s, tc);
    return check_run(s);
}
