/* gemm(): the row-major entry, and the row-major -> column-major argument mapping a cuBLAS path
 * uses, both against a naive row-major triple loop, for all transpose combinations with odd sizes
 * and padded leading dimensions; gemm() also on 1, 2 and 3 threads, which cut large products into
 * blocks of columns or rows. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "nn/cpu/gemm.h"
#include "base/rng.h"
#include "base/threads.h"
#include "../check_run.h"

/* Odd shapes, including degenerate 1s, and leading-dimension padding; the last two are large enough
 * for gemm() to share among threads (by columns, then by rows). */
static const struct {
    int m, n, k, pad;
} shapes[] = {{7, 5, 3, 2},    {1, 9, 4, 1},     {13, 1, 11, 3},  {17, 19, 1, 0},
              {33, 29, 31, 5}, {67, 301, 97, 3}, {257, 45, 91, 1}};

/* Element (i, j) of a row-major matrix with leading dimension ld, or of its transpose. */
static float at(const float *a, int ld, int trans, int i, int j)
{
    return trans ? a[(size_t)j * ld + i] : a[(size_t)i * ld + j];
}

/* Column-major op(A)[m][k] op(B)[k][n] with BLAS conventions: what cuBLAS would compute. */
static void naive_colmajor(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                           int ldb, float beta, float *c, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i]) *
                     (tb ? b[(size_t)p * ldb + j] : b[(size_t)j * ldb + p]);
            c[(size_t)j * ldc + i] = (float)(alpha * s + beta * c[(size_t)j * ldc + i]);
        }
}

static float *random_matrix(size_t count, uint64_t key)
{
    float *p = malloc(count * sizeof *p);
    for (size_t i = 0; i < count; i++)
        p[i] = 2.0f * rng_uniform(key, i) - 1.0f;
    return p;
}

/* Runs shape s with transposes (ta, tb) through `gemm` (use_map 0) or the mapped naive column-major
 * call (use_map 1) and compares with a row-major triple loop in double; padding of C must survive. */
static void run_case(int s, int ta, int tb, int use_map)
{
    int m = shapes[s].m, n = shapes[s].n, k = shapes[s].k, pad = shapes[s].pad;
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t arows = ta ? k : m, brows = tb ? n : k;
    float *a = random_matrix(arows * lda, rng_key(1, s)), *b = random_matrix(brows * ldb, rng_key(2, s));
    float *c = random_matrix((size_t)m * ldc, rng_key(3, s)), *c0 = random_matrix((size_t)m * ldc, rng_key(3, s));
    const float alpha = 0.75f, beta = -1.5f;
    if (use_map) {
        gemm_args g = gemm_colmajor(ta, tb, m, n, k, a, lda, b, ldb);
        naive_colmajor(g.trans_a, g.trans_b, g.m, g.n, g.k, alpha, g.a, g.lda, g.b, g.ldb, beta, c, ldc);
    } else {
        gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double ref = 0.0;
            for (int p = 0; p < k; p++)
                ref += (double)at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
            ref = alpha * ref + beta * c0[(size_t)i * ldc + j];
            /* Inputs in [-1, 1], k <= 97: float rounding stays below 1e-5 of 1 + |C| (random signs: errors
             * grow about as sqrt(k) 2^-24 |C|). */
            ck_assert_msg(fabs(c[(size_t)i * ldc + j] - ref) <= 1e-5 * (1.0 + fabs(ref)),
                          "shape %d ta %d tb %d map %d: C[%d][%d] = %g, expected %g", s, ta, tb, use_map, i, j,
                          (double)c[(size_t)i * ldc + j], ref);
        }
        for (int j = n; j < ldc; j++)
            ck_assert_msg(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j], "padding of C row %d written", i);
    }
    free(a);
    free(b);
    free(c);
    free(c0);
}

/* Loop index: bit 0 trans_a, bit 1 trans_b, the rest the thread count - 1. */
START_TEST(test_gemm_rowmajor)
{
    omp_set_num_threads(1 + (_i >> 2));
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        run_case((int)s, _i & 1, (_i >> 1) & 1, 0);
}
END_TEST

START_TEST(test_colmajor_mapping)
{
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        run_case((int)s, _i & 1, _i >> 1, 1);
}
END_TEST

/* The mapping itself: A and B, m and n and the flags swap; k stays. */
START_TEST(test_mapping_fields)
{
    float a = 0, b = 0;
    gemm_args g = gemm_colmajor(1, 0, 3, 5, 7, &a, 11, &b, 13);
    ck_assert_int_eq(g.trans_a, 0);
    ck_assert_int_eq(g.trans_b, 1);
    ck_assert_int_eq(g.m, 5);
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(g.k, 7);
    ck_assert_ptr_eq(g.a, &b);
    ck_assert_int_eq(g.lda, 13);
    ck_assert_ptr_eq(g.b, &a);
    ck_assert_int_eq(g.ldb, 11);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_add_loop_test(tc, test_gemm_rowmajor, 0, 12);
    tcase_add_loop_test(tc, test_colmajor_mapping, 0, 4);
    tcase_add_test(tc, test_mapping_fields);
    suite_add_tcase(s, tc);
    return check_run(s);
}
