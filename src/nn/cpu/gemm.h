/* The single GEMM entry of the model. Row-major semantics, like the arrays in the model:
 * C[m][n] = alpha op(A)[m][k] op(B)[k][n] + beta C, op(X) = X or X^T per trans flag. The CPU
 * path is gemm_avx512.h's kernels where they apply, else CBLAS; a cuBLAS path takes the same column-major
 * arguments from gemm_colmajor(). */
#ifndef MNIST_GEMM_H
#define MNIST_GEMM_H

void gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
          float beta, float *c, int ldc);

/* 1 (the default): products gemm_avx512.h takes run there on CPUs with AVX-512; 0: all in BLAS (--gemm blas).
 * Set before the first product. */
void gemm_use_own(int on);
/* Whether the own kernels run (chosen and this CPU has AVX-512). */
int gemm_own_active(void);

/* The same as one BLAS call on the calling thread (never the own kernels), for callers that share their own
 * work among threads. */
void gemm_serial(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc);

/* A row-major product read as column-major memory is the transposed product, C^T = op(B)^T op(A)^T:
 * the column-major (BLAS/cuBLAS) call swaps A with B, m with n and the transpose flags. The C
 * pointer, ldc, alpha and beta are unchanged. */
typedef struct {
    int trans_a, trans_b, m, n, k;
    const float *a;
    int lda;
    const float *b;
    int ldb;
} gemm_args;

gemm_args gemm_colmajor(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
                        int ldb);
#endif
