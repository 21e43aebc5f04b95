#include "nn/cpu/gemm.h"

#include <cblas.h>

#include "base/threads.h"
#include "nn/cpu/gemm_avx512.h"

static int own = 1; /* set once before any product (gemm_use_own) */

void gemm_use_own(int on) { own = on; }

int gemm_own_active(void) { return own && gemm_avx512_has_cpu(); }

gemm_args gemm_colmajor(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda, const float *b, int ldb)
{
    gemm_args g = {
        .trans_a = trans_b, .trans_b = trans_a, .m = n, .n = m, .k = k, .a = b, .lda = ldb, .b = a, .ldb = lda};
    return g;
}

void gemm_serial(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    gemm_args g = gemm_colmajor(trans_a, trans_b, m, n, k, a, lda, b, ldb);
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
                g.k, alpha, g.a, g.lda, g.b, g.ldb, beta, c, ldc);
}

/* Products below this many multiply-adds run whole on one thread (a split costs more than it saves), and in
 * BLAS: the own kernels were tuned and measured on fc1's products only. */
#define GEMM_SPLIT_MIN (1 << 20)

/* One thread's block: the own kernels or BLAS, as chosen for the whole product (a block's size must not
 * change the choice: the bits would depend on --threads). */
static void block(int mine, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!mine || !gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* With more than one OpenMP thread, the larger of C's two dimensions is cut into one block per thread,
 * each a single-threaded BLAS call. OpenBLAS's own thread pool spins between calls on the cores the OpenMP
 * threads use, which made fc1's GEMMs slower with --threads 2 than with one thread (docs/performance.md). */
void gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
          float beta, float *c, int ldc)
{
    int threads = omp_get_max_threads(), by_col = n >= m, len = by_col ? n : m;
    int large = (double)m * n * k >= GEMM_SPLIT_MIN, mine = own && large;
    if (threads < 2 || !large || len < 2 * threads) {
        block(mine, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    PARALLEL_FOR
    for (int t = 0; t < threads; t++) {
        int lo = (int)((long)len * t / threads), hi = (int)((long)len * (t + 1) / threads);
        if (by_col) /* columns lo..hi of op(B) and C */
            block(mine, trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + (size_t)lo * ldb : b + lo, ldb,
                  beta, c + lo, ldc);
        else /* rows lo..hi of op(A) and C */
            block(mine, trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + (size_t)lo * lda, lda, b, ldb,
                  beta, c + (size_t)lo * ldc, ldc);
    }
}
