/* The model's large products (fc1's three; im2col's with --conv im2col) in AVX-512 kernels of this project's
 * own instead of OpenBLAS's, where the CPU has AVX-512 (gemm.c: products of at least 2^20 multiply-adds).
 * OpenBLAS's AVX-512 kernels pack both operands on every call; these do not, and run fc1's products faster
 * (tests/bench/bench_gemm; docs/performance.md). Row-major, as gemm.h: C = op(A) op(B) + beta C with alpha 1
 * and beta 0 or 1.
 *
 * Every element of C is the same sequence of operations wherever the product is cut (tiles, threads' blocks),
 * so the bits do not depend on --threads. With B not transposed each element sums over k in order, one fused
 * multiply-add per term from zero, then adds C's value (OpenBLAS's order on that CPU: the same bits). With B
 * transposed (fc1's forward) sixteen lanes sum every sixteenth term over blocks of 2304 terms, each block's
 * lanes added by a fixed tree and the blocks in order. */
#ifndef MNIST_GEMM_AVX512_H
#define MNIST_GEMM_AVX512_H
#include "config.h"

#ifdef HAVE_AVX512_KERNELS
/* Whether this CPU runs the kernels (AVX-512F). */
int gemm_avx512_has_cpu(void);
/* Does the product and returns 1, or returns 0 having done nothing: not this CPU, alpha not 1, beta not 0
 * or 1, or both operands transposed. */
int gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                int ldb, float beta, float *c, int ldc);
#else
static inline int gemm_avx512_has_cpu(void) { return 0; }
static inline int gemm_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                              const float *b, int ldb, float beta, float *c, int ldc)
{
    return (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
           (void)beta, (void)c, (void)ldc, 0;
}
#endif
#endif
