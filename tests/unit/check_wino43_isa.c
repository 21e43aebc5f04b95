/* wino43's AVX2 kernels (a CPU without AVX-512: AMD Zen 2 and 3, older Intel) against its AVX-512 ones, bit
 * for bit: the same operations lane for lane (wino43_v16.h), only the product blocks' accumulator counts
 * differ, and those do not change any sum's order. check_conv holds the AVX-512 kernels (and, on a CPU
 * without AVX-512, the AVX2 ones) to the convolution's definition; tests/integration/cpu-avx2.sh runs it and
 * a training with the ISA capped. Built only where the kernels are (oneDNN, x86-64). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/wino43_kernels.h"
#include "../check_run.h"
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
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("check_wino43_isa: this CPU lacks AVX-512 (or AVX2): nothing to compare the AVX2 kernels with; "
               "check_conv holds them to the definition here\n");
        return;
    }
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

int main(void)
{
    Suite *s = suite_create("wino43_isa");
    TCase *tc = tcase_create("wino43_isa");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_wino43_avx2_bits);
    suite_add_tcase(s, tc);
    return check_run(s);
}
