// gemm() of src/nn/cpu/gemm.h for device pointers: cuBLAS (column-major) through the row-major -> column-major
// argument mapping gemm_colmajor() that the CPU path's CBLAS call uses too (tests/unit/check_gemm.c checks it),
// on the compute stream (or the side stream, gpu_gemm_side), with the precision of --precision. And a linear
// layer's forward as one cuBLASLt matmul whose epilogue adds the bias and applies the ReLU (gpu_linear_lt).
#include "config.h"

#include <cstring>

#include <cublasLt.h>

#include "gpu/cuda/cuda_check.h"
#include "gpu/gpu.h"
extern "C" {
#include "nn/cpu/gemm.h"
}

static cublasHandle_t handle = nullptr, side_handle = nullptr; // on the compute stream, on the side stream
static cublasMath_t math_mode;
static int use_gemm_ex = 0; // bf16: cublasGemmEx with bf16 tensor-core compute
static cublasComputeType_t lt_compute;

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
    lt_compute = use_gemm_ex                          ? CUBLAS_COMPUTE_32F_FAST_16BF
                 : math == CUBLAS_TF32_TENSOR_OP_MATH ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                      : CUBLAS_COMPUTE_32F;
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

// One matmul's descriptors and algorithm, found once (cuBLASLt's heuristic is host work that a graph
// capture must not repeat). The bias pointer is part of the key: the heuristic reads its alignment.
typedef struct {
    int m, n, k, relu, ok;
    const float *bias;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

enum { LT_PLANS = 32 };
static const size_t LT_WORKSPACE = (size_t)4 << 20; // what cuBLASLt's larger fp32 tiles ask for, once
static cublasLtHandle_t lt_handle;
static void *lt_workspace;
static lt_plan lt_plans[LT_PLANS];
static int lt_nplans;

extern "C" void gpu_blas_lt_init(void)
{
    if (!handle)
        die(EX_SOFTWARE, "gpu_blas_lt_init: gpu_blas_init() was not called");
    if (lt_handle)
        return;
    CUBLAS_CHECK(cublasLtCreate(&lt_handle));
    CUDA_CHECK(cudaMalloc(&lt_workspace, LT_WORKSPACE));
}

static void lt_set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *v, size_t bytes)
{
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, v, bytes));
}

// Column-major D[m][n] = op(A) op(B) (+ bias per row, through ReLU), as gemm_colmajor() maps the row-major call.
static void lt_plan_make(lt_plan *p, const gemm_args *g)
{
    int32_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t epi = p->relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, lt_compute, CUDA_R_32F));
    lt_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    lt_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    lt_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    lt_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias);
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, ta ? g->k : g->m, ta ? g->m : g->k, g->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, tb ? g->n : g->k, tb ? g->k : g->n, g->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, g->m, g->n, g->m));
    cublasLtMatmulPreference_t pref;
    uint64_t ws = LT_WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t r = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_handle, p->desc, p->a, p->b, p->d, p->d, pref, 1, &r, &found);
    if (st != CUBLAS_STATUS_NOT_SUPPORTED) // cuBLASLt's "no heuristic for this configuration": composed
        CUBLAS_CHECK(st);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    p->ok = found > 0 && r.state == CUBLAS_STATUS_SUCCESS;
    p->algo = r.algo;
    if (!p->ok)
        warn("cuBLASLt has no matmul with a bias%s epilogue for %d x %d x %d: that layer's forward stays a GEMM and "
             "kernels",
             p->relu ? " and ReLU" : "", g->m, g->n, g->k);
}

static const lt_plan *lt_plan_for(const gemm_args *g, const float *bias, int relu)
{
    for (int i = 0; i < lt_nplans; i++) {
        const lt_plan *p = &lt_plans[i];
        if (p->m == g->m && p->n == g->n && p->k == g->k && p->relu == relu && p->bias == bias)
            return p;
    }
    if (lt_nplans == LT_PLANS)
        return NULL; // more shapes than a run has: the rest are composed
    lt_plan *p = &lt_plans[lt_nplans++];
    *p = (lt_plan){.m = g->m, .n = g->n, .k = g->k, .relu = relu, .bias = bias};
    lt_plan_make(p, g);
    return p;
}

extern "C" int gpu_linear_lt(const float *x, const float *w, const float *b, float *y, int N, int in, int out, int relu)
{
    if (!lt_handle)
        die(EX_SOFTWARE, "gpu_linear_lt: gpu_blas_lt_init() was not called");
    // y[N][out] = x[N][in] w[out][in]^T: gemm(0, 1, ...) of linear_forward.
    gemm_args g = gemm_colmajor(0, 1, N, out, in, x, in, w, in);
    const lt_plan *p = lt_plan_for(&g, b, relu);
    if (!p || !p->ok)
        return 0;
    const float one = 1.0f, zero = 0.0f;
    gpu_count_gemm();
    CUBLAS_CHECK(cublasLtMatmul(lt_handle, p->desc, &one, g.a, p->a, g.b, p->b, &zero, y, p->d, y, p->d, &p->algo,
                                lt_workspace, LT_WORKSPACE, (cudaStream_t)gpu_compute_stream()));
    return 1;
}

static void lt_free(void)
{
    for (int i = 0; i < lt_nplans; i++) {
        lt_plan *p = &lt_plans[i];
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->d));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
        CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
        CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
    }
    lt_nplans = 0;
    if (lt_workspace)
        CUDA_CHECK(cudaFree(lt_workspace));
    if (lt_handle)
        CUBLAS_CHECK(cublasLtDestroy(lt_handle));
    lt_workspace = nullptr;
    lt_handle = nullptr;
}

extern "C" void gpu_blas_free(void)
{
    lt_free();
    if (side_handle)
        CUBLAS_CHECK(cublasDestroy(side_handle));
    if (handle)
        CUBLAS_CHECK(cublasDestroy(handle));
    handle = side_handle = nullptr;
    use_gemm_ex = 0;
}
