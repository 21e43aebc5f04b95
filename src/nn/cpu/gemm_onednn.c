#include "nn/cpu/gemm_onednn.h"

#include <dnnl.h>

#include "base/threads.h"
#include "nn/cpu/gemm.h"
#include "nn/cpu/onednn_arg.h"

/* oneDNN's on one thread where op(A) is A and the products are long and large: net's fc1 forward, x w^T, and
 * input gradient, dy w, 1.06 and 1.23 times as fast as OpenBLAS's Cooperlake kernels in the trainer on Zen 4
 * (which packs w, 4.7 MB, for each). gemm() (OpenBLAS) for the rest: the weight gradients (A transposed:
 * oneDNN's was slower), short products, small ones (fc2's forward, 64 x 10 x 128, took 16 times as long in
 * oneDNN's), and any product on more threads (fc1's forward took 1.7 times as long in oneDNN's on two threads,
 * whether split by gemm() or by oneDNN itself). */
void onednn_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc)
{
    if (trans_a || k <= 64 || (double)m * n * k < 1 << 20 || omp_get_max_threads() > 1) {
        gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    DNNL_CHECK(dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}
