/* cuBLASLt in the simulation: handles and descriptors, checked as cuBLASLt checks them (attribute sizes, the
 * operands' shapes agreeing, a bias where the epilogue adds one), and a matmul computed as a GEMM whose
 * epilogue adds the bias of each row of D and applies the ReLU (gpu_mock_stream.c). */
#include "gpu_mock.h"

#include <stdint.h>
#include <stdlib.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h declares cublasLtLoggerForceDisable() */
#include <cublasLt.h>
#pragma GCC diagnostic pop

struct cublasLtContext {
    int alive;
};

typedef struct {
    cublasComputeType_t compute;
    int32_t ta, tb;
    uint32_t epilogue;
    const float *bias;
} lt_desc;

typedef struct {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
} lt_layout;

_Static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "a descriptor fits cuBLASLt's");
_Static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "a layout fits cuBLASLt's");

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    cublasStatus_t r = (cublasStatus_t)mock_injected("cublasLtCreate");
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    *h = calloc(1, sizeof **h);
    (*h)->alive = 1;
    mock.lt_handles++;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    mock.lt_handles--;
    return CUBLAS_STATUS_SUCCESS;
}

/* The opaque object of `bytes` (cuBLASLt's size for its kind), counted until destroyed. */
static void *lt_object(size_t bytes)
{
    mock.lt_objects++;
    return calloc(1, bytes);
}

static cublasStatus_t lt_release(void *p)
{
    free(p);
    mock.lt_objects--;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale)
{
    if (scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = lt_object(sizeof **d);
    *(lt_desc *)*d = (lt_desc){.compute = compute, .ta = CUBLAS_OP_N, .tb = CUBLAS_OP_N, .epilogue = 1};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return lt_release(d); }

/* The attributes mnist_ddp sets, each of its documented size; an epilogue other than the bias ones is not modelled. */
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes)
{
    lt_desc *s = (lt_desc *)d;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (bytes != sizeof(int32_t))
            return CUBLAS_STATUS_INVALID_VALUE;
        *(attr == CUBLASLT_MATMUL_DESC_TRANSA ? &s->ta : &s->tb) = *(const int32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (bytes != sizeof(uint32_t))
            return CUBLAS_STATUS_INVALID_VALUE;
        s->epilogue = *(const uint32_t *)buf;
        return s->epilogue == CUBLASLT_EPILOGUE_DEFAULT || s->epilogue == CUBLASLT_EPILOGUE_BIAS ||
                       s->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS
                   ? CUBLAS_STATUS_SUCCESS
                   : CUBLAS_STATUS_NOT_SUPPORTED;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (bytes != sizeof(void *))
            return CUBLAS_STATUS_INVALID_VALUE;
        s->bias = *(const float *const *)buf;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    if (ld < 1 || (uint64_t)ld < rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    *l = lt_object(sizeof **l);
    *(lt_layout *)*l = (lt_layout){.type = type, .rows = rows, .cols = cols, .ld = ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return lt_release(l); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = lt_object(sizeof **p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return lt_release(p); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes)
{
    (void)p, (void)buf;
    return attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(uint64_t) ? CUBLAS_STATUS_SUCCESS
                                                                                         : CUBLAS_STATUS_INVALID_VALUE;
}

/* D [m][n] = op(A) [m][k] op(B) [k][n] (C laid out as D), all fp32; a bias epilogue needs its vector. */
static cublasStatus_t lt_shape(const lt_desc *d, const lt_layout *a, const lt_layout *b, const lt_layout *c,
                               const lt_layout *dd, int *m, int *n, int *k)
{
    uint64_t am = d->ta ? a->cols : a->rows, ak = d->ta ? a->rows : a->cols;
    uint64_t bk = d->tb ? b->cols : b->rows, bn = d->tb ? b->rows : b->cols;
    if (a->type != CUDA_R_32F || b->type != CUDA_R_32F || c->type != CUDA_R_32F || dd->type != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (am != dd->rows || bn != dd->cols || ak != bk || c->rows != dd->rows || c->cols != dd->cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && !d->bias)
        return CUBLAS_STATUS_INVALID_VALUE;
    *m = (int)am, *n = (int)bn, *k = (int)ak;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t res[], int *got)
{
    int m, n, k;
    if (!h || !h->alive || !p || want < 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t r = (cublasStatus_t)mock_injected("cublasLtMatmulAlgoGetHeuristic");
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    r = lt_shape((const lt_desc *)d, (const lt_layout *)a, (const lt_layout *)b, (const lt_layout *)c,
                 (const lt_layout *)dd, &m, &n, &k);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    mock.lt_heuristics++;
    mock.lt_compute = ((const lt_desc *)d)->compute;
    res[0] = (cublasLtMatmulHeuristicResult_t){.state = CUBLAS_STATUS_SUCCESS, .wavesCount = 1.0f};
    *got = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *a,
                              cublasLtMatrixLayout_t al, const void *b, cublasLtMatrixLayout_t bl, const void *beta,
                              const void *c, cublasLtMatrixLayout_t cl, void *dd, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes, cudaStream_t s)
{
    (void)ws, (void)wsbytes;
    int m, n, k;
    const lt_desc *desc = (const lt_desc *)d;
    if (!h || !h->alive || !algo)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t r = lt_shape(desc, (const lt_layout *)al, (const lt_layout *)bl, (const lt_layout *)cl,
                                (const lt_layout *)dl, &m, &n, &k);
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    float b0 = *(const float *)beta;
    if (b0 != 0 && c != dd)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* C apart from D: not modelled */
    mock.lt_matmuls++;
    const float *bias = desc->epilogue == CUBLASLT_EPILOGUE_DEFAULT ? NULL : desc->bias;
    return mock_gemm(s, desc->ta != CUBLAS_OP_N, desc->tb != CUBLAS_OP_N, m, n, k, *(const float *)alpha, a,
                     (int)((const lt_layout *)al)->ld, b, (int)((const lt_layout *)bl)->ld, b0, dd,
                     (int)((const lt_layout *)dl)->ld, bias, desc->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS);
}
