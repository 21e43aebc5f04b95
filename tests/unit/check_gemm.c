/* gemm(): the row-major entry, and the row-major -> column-major argument mapping a cuBLAS path
 * uses, both against a naive row-major triple loop, for all transpose combinations with odd sizes
 * and padded leading dimensions; gemm() also on 1, 2 and 3 threads, which cut large products into
 * blocks of columns or rows. The own AVX-512 kernels (gemm_avx512.h, alpha 1, beta 0 or 1): against sums in
 * double on fc1's three shapes and on shapes with every kind of edge; B not transposed bit for bit as the
 * fused multiply-adds in order the header promises; the same bits on 1, 2 and 3 threads and as the kernels
 * called directly; --gemm blas (gemm_use_own(0)) leaves them out. */
#include "../check_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/gemm.h"
#include "nn/cpu/gemm_avx512.h"
#include "base/rng.h"
#include "base/threads.h"

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

/* The own kernels' shapes: fc1's forward (B transposed), input gradient and weight gradient (A transposed), and
 * shapes with partial tiles of rows, of 96 columns and of the last 16, k past a 2304-term block and not a
 * multiple of 16, padded leading dimensions. */
static const struct {
    int ta, tb, m, n, k, pad;
} own_shapes[] = {{0, 1, 64, 128, 9216, 0}, {0, 0, 64, 9216, 128, 0}, {1, 0, 128, 9216, 64, 0},
                  {0, 1, 37, 23, 2500, 3},  {0, 0, 37, 203, 301, 5},  {1, 0, 39, 250, 171, 1}};

/* The product in double, then alpha 1 and beta as given. */
static double reference(int ta, int tb, int i, int j, int k, const float *a, int lda, const float *b, int ldb,
                        double c0, float beta, double *mag)
{
    double s = 0, sq = 0;
    for (int p = 0; p < k; p++) {
        double t = (double)at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
        s += t;
        sq += t * t;
    }
    *mag = sqrt(sq);
    return s + beta * c0;
}

/* The order the header promises for B not transposed: from zero, one fused multiply-add per term in order,
 * then C's value added. */
static float fma_chain(int ta, int i, int j, int k, const float *a, int lda, const float *b, int ldb, float c0,
                       float beta)
{
    float acc = 0;
    for (int p = 0; p < k; p++)
        acc = fmaf(at(a, lda, ta, i, p), b[(size_t)p * ldb + j], acc);
    return beta != 0.0f ? c0 + acc : acc;
}

/* Loop index: bit 0 beta (0 or 1), the rest the shape. */
START_TEST(test_own_kernels)
{
    if (!gemm_avx512_has_cpu()) {
        printf("skip: own GEMM kernels: this CPU has no AVX-512 (or this build no AVX-512 kernels)\n");
        return;
    }
    int sh = _i >> 1, ta = own_shapes[sh].ta, tb = own_shapes[sh].tb, m = own_shapes[sh].m, n = own_shapes[sh].n,
        k = own_shapes[sh].k, pad = own_shapes[sh].pad;
    float beta = (float)(_i & 1);
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t arows = ta ? k : m, brows = tb ? n : k, csize = (size_t)m * ldc;
    float *a = random_matrix(arows * lda, rng_key(4, sh)), *b = random_matrix(brows * ldb, rng_key(5, sh));
    float *c0 = random_matrix(csize, rng_key(6, sh)), *c = malloc(csize * sizeof *c), *t = malloc(csize * sizeof *t);
    memcpy(c, c0, csize * sizeof *c);
    ck_assert_int_eq(gemm_avx512(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc), 1);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double mag, ref = reference(ta, tb, i, j, k, a, lda, b, ldb, c0[(size_t)i * ldc + j], beta, &mag);
            float got = c[(size_t)i * ldc + j];
            /* float sums of k random-signed terms: errors about sqrt(k) 2^-24 times the terms' root sum of
             * squares; 8 times that (a term missed or counted twice is 1/sqrt(k) of it, far more) */
            ck_assert_msg(fabs(got - ref) <= 8 * sqrt((double)k) * 0x1p-24 * mag + 0x1p-23 * fabs(ref),
                          "shape %d beta %g: C[%d][%d] = %.9g, expected %.9g", sh, (double)beta, i, j, (double)got,
                          ref);
            if (!tb)
                ck_assert_msg(got == fma_chain(ta, i, j, k, a, lda, b, ldb, c0[(size_t)i * ldc + j], beta),
                              "shape %d beta %g: C[%d][%d] not the multiply-adds in order", sh, (double)beta, i, j);
        }
        for (int j = n; j < ldc; j++)
            ck_assert_msg(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j], "padding of C row %d written", i);
    }
    for (int threads = 1; threads <= 3; threads++) { /* gemm() cuts among threads: the same bits */
        omp_set_num_threads(threads);
        memcpy(t, c0, csize * sizeof *t);
        gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, t, ldc);
        ck_assert_msg(memcmp(t, c, csize * sizeof *t) == 0, "shape %d: other bits on %d threads", sh, threads);
    }
    gemm_use_own(0); /* --gemm blas: BLAS's sums, which differ in some bits for B transposed */
    memcpy(t, c0, csize * sizeof *t);
    gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, t, ldc);
    gemm_use_own(1);
    if (tb)
        ck_assert_msg(memcmp(t, c, csize * sizeof *t) != 0, "shape %d: --gemm blas gave the own kernel's bits", sh);
    free(a);
    free(b);
    free(c0);
    free(c);
    free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_add_loop_test(tc, test_gemm_rowmajor, 0, 12);
    tcase_add_loop_test(tc, test_colmajor_mapping, 0, 4);
    tcase_add_test(tc, test_mapping_fields);
    tcase_add_loop_test(tc, test_own_kernels, 0, 2 * (int)(sizeof own_shapes / sizeof *own_shapes));
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return check_run(s);
}
