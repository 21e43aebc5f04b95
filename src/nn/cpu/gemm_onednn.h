/* gemm.h's gemm for oneDNN's backend: oneDNN's sgemm for the products it runs faster than OpenBLAS, OpenBLAS for
 * the rest. Built with oneDNN only. */
#ifndef MNIST_GEMM_ONEDNN_H
#define MNIST_GEMM_ONEDNN_H

void onednn_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc);
#endif
