#include "gemm.h"

#include <cblas.h>

gemm_args gemm_colmajor(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b,
                        int ldb)
{
    gemm_args g = {.trans_a = trans_b, .trans_b = trans_a, .m = n, .n = m, .k = k,
                   .a = b, .lda = ldb, .b = a, .ldb = lda};
    return g;
}

void gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
          int ldb, float beta, float *c, int ldc)
{
    gemm_args g = gemm_colmajor(trans_a, trans_b, m, n, k, a, lda, b, ldb);
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
                g.k, alpha, g.a, g.lda, g.b, g.ldb, beta, c, ldc);
}
