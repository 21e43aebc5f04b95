// gemm() of src/nn/cpu/gemm.h for device pointers: cuBLAS (column-major) through the row-major -> column-major
// argument mapping gemm_colmajor() that the CPU path's CBLAS call uses too (tests/unit/check_gemm.c checks it),
// on the compute stream (or the side stream, gpu_gemm_side), with the precision of --precision.
#include "config.h"

#include <cstring>

#include "gpu/cuda/cuda_check.h"
#include "gpu/gpu.h"
extern "C" {
#include "nn/cpu/gemm.h"
}

static cublasHandle_t handle = nullptr, side_handle = nullptr; // on the compute stream, on the side stream
static cublasMath_t math_mode;
static int use_gemm_ex = 0; // bf16: cublasGemmEx with bf16 tensor-core compute

extern "C" void gpu_blas_init(const char *precision)
{
    if (handle)
        die(EX_SOFTWARE, "gpu_blas_init: called twice");
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    if (!s)
        die(EX_SOFTWARE, "gpu_blas_init: no device bound (gpu_select() comes first)");
    cublasMath_t math;
    if (strcmp(precision, "fp32") == 0) {
        math = CUBLAS_DEFAULT_MATH; // full fp32: no TF32 unless asked for
    } else if (strcmp(precision, "tf32") == 0) {
        math = CUBLAS_TF32_TENSOR_OP_MATH; // fp32 in and out, 10-bit mantissa products on tensor cores
    } else if (strcmp(precision, "bf16") == 0) {
        math = CUBLAS_DEFAULT_MATH;
        use_gemm_ex = 1;
    } else {
        die(EX_USAGE, "--precision %s: expected fp32, tf32 or bf16", precision);
    }
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetStream(handle, s)); // every GEMM is ordered with the kernels and the all-reduce events
    CUBLAS_CHECK(cublasSetMathMode(handle, math));
    math_mode = math;
}

extern "C" void gpu_blas_side_init(void)
{
    if (!handle)
        die(EX_SOFTWARE, "gpu_blas_side_init: gpu_blas_init() was not called");
    if (side_handle)
        return;
    CUBLAS_CHECK(cublasCreate(&side_handle));
    CUBLAS_CHECK(cublasSetStream(side_handle, (cudaStream_t)gpu_side_stream()));
    CUBLAS_CHECK(cublasSetMathMode(side_handle, math_mode));
}

static void gemm_on(cublasHandle_t h, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap A/B, m/n and the flags.
    gemm_args g = gemm_colmajor(trans_a, trans_b, m, n, k, a, lda, b, ldb);
    cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    gpu_count_gemm();
    if (use_gemm_ex)
        CUBLAS_CHECK(cublasGemmEx(h, ta, tb, g.m, g.n, g.k, &alpha, g.a, CUDA_R_32F, g.lda, g.b, CUDA_R_32F, g.ldb,
                                  &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasSgemm(h, ta, tb, g.m, g.n, g.k, &alpha, g.a, g.lda, g.b, g.ldb, &beta, c, ldc));
}

extern "C" void gpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!handle)
        die(EX_SOFTWARE, "gpu_gemm: gpu_blas_init() was not called");
    gemm_on(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

extern "C" void gpu_gemm_side(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                              const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!side_handle)
        die(EX_SOFTWARE, "gpu_gemm_side: gpu_blas_side_init() was not called");
    gemm_on(side_handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

extern "C" void gpu_blas_free(void)
{
    if (side_handle)
        CUBLAS_CHECK(cublasDestroy(side_handle));
    if (handle)
        CUBLAS_CHECK(cublasDestroy(handle));
    handle = side_handle = nullptr;
    use_gemm_ex = 0;
}
