/* cuBLAS and cuBLASLt opened when the GPU path first asks for them (dlopen), not linked. Linked, libcublas would
 * make every process, CPU-only runs and `--version` included, run its and libcublasLt's slow constructors at
 * start-up (docs/gpu.md). These definitions stand in for the cuBLAS and cuBLASLt functions
 * src/gpu/cuda/gemm_cublas.cu calls and forward to the libraries'. A new call needs its stand-in here: without one
 * the link fails, cuBLAS not being linked. The simulated runtime (tests/gpu/gpu_mock.c, gpu_mock_lt.c) defines the
 * same names, so its programs never pull this object from the archive. dlopen searches as the loader searched for
 * a linked cuBLAS: LD_LIBRARY_PATH, the binary's run path (configure's CUDA directory), the system's. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* cublasLt.h declares cublasLtLoggerForceDisable() */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>

#include "gpu/cuda/cublas_dl.h"

#define CUBLAS_DL_STR_(x) #x
#define CUBLAS_DL_STR(x)  CUBLAS_DL_STR_(x)
#define CUBLAS_SONAME     "libcublas.so." CUBLAS_DL_STR(CUBLAS_VER_MAJOR)
#define CUBLASLT_SONAME   "libcublasLt.so." CUBLAS_DL_STR(CUBLAS_VER_MAJOR)

static struct {
    int tried;
    void *lib, *lt; /* lt: cuBLASLt, which cuBLAS itself needs: opened beside it */
    char why[600];
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    const char *(*status_name)(cublasStatus_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                            const float *, int, const float *, int, const float *, float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*lt_create)(cublasLtHandle_t *);
    cublasStatus_t (*lt_destroy)(cublasLtHandle_t);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *, size_t);
    cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                cublasLtMatmulHeuristicResult_t[], int *);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                             cudaStream_t);
} dl;

/* *fn = NAME from the library at handle (a function pointer's object representation: ISO C has no cast from
 * void *). */
static int sym_in(void *handle, void *fn, const char *name, const char *lib)
{
    void *p = dlsym(handle, name);
    if (!p)
        snprintf(dl.why, sizeof dl.why, "%s has no %s (not cuBLAS %d?)", lib, name, CUBLAS_VER_MAJOR);
    *(void **)fn = p;
    return p != NULL;
}

static int sym(void *fn, const char *name, const char *lib) { return sym_in(dl.lib, fn, name, lib); }

static int lt_sym(void *fn, const char *name) { return sym_in(dl.lt, fn, name, CUBLASLT_SONAME); }

/* cuBLASLt's functions, from the library of this major version (the loader found it for cuBLAS already). */
static int open_lt(void)
{
    dl.lt = dlopen(CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!dl.lt) {
        snprintf(dl.why, sizeof dl.why, "cuBLASLt could not be loaded: %s", dlerror());
        return 0;
    }
    return lt_sym(&dl.lt_create, "cublasLtCreate") && lt_sym(&dl.lt_destroy, "cublasLtDestroy") &&
           lt_sym(&dl.desc_create, "cublasLtMatmulDescCreate") &&
           lt_sym(&dl.desc_destroy, "cublasLtMatmulDescDestroy") &&
           lt_sym(&dl.desc_set, "cublasLtMatmulDescSetAttribute") &&
           lt_sym(&dl.layout_create, "cublasLtMatrixLayoutCreate") &&
           lt_sym(&dl.layout_destroy, "cublasLtMatrixLayoutDestroy") &&
           lt_sym(&dl.pref_create, "cublasLtMatmulPreferenceCreate") &&
           lt_sym(&dl.pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
           lt_sym(&dl.pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
           lt_sym(&dl.heuristic, "cublasLtMatmulAlgoGetHeuristic") && lt_sym(&dl.matmul, "cublasLtMatmul");
}

int cublas_dl_open(const char *lib)
{
    if (dl.tried)
        return dl.lib != NULL;
    dl.tried = 1;
    lib = lib ? lib : CUBLAS_SONAME;
    dl.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!dl.lib) {
        snprintf(dl.why, sizeof dl.why,
                 "cuBLAS could not be loaded: %s; the GPU path needs CUDA %d's libraries: load the CUDA module this "
                 "binary was built with, or set LD_LIBRARY_PATH to their directory",
                 dlerror(), CUBLAS_VER_MAJOR);
        return 0;
    }
    if (sym(&dl.create, "cublasCreate_v2", lib) && sym(&dl.destroy, "cublasDestroy_v2", lib) &&
        sym(&dl.set_stream, "cublasSetStream_v2", lib) && sym(&dl.set_math_mode, "cublasSetMathMode", lib) &&
        sym(&dl.status_name, "cublasGetStatusName", lib) && sym(&dl.status_string, "cublasGetStatusString", lib) &&
        sym(&dl.sgemm, "cublasSgemm_v2", lib) && sym(&dl.gemm_ex, "cublasGemmEx", lib) && open_lt())
        return 1;
    if (dl.lt)
        dlclose(dl.lt);
    dlclose(dl.lib);
    dl.lib = dl.lt = NULL;
    return 0;
}

static int loaded(void) { return cublas_dl_open(NULL); }

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { return loaded() ? dl.create(h) : CUBLAS_STATUS_NOT_INITIALIZED; }

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return loaded() ? dl.destroy(h) : CUBLAS_STATUS_NOT_INITIALIZED; }

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    return loaded() ? dl.set_stream(h, s) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    return loaded() ? dl.set_math_mode(h, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* Without the library, the status of every call is CUBLAS_STATUS_NOT_INITIALIZED and its text says why. */
const char *cublasGetStatusName(cublasStatus_t s)
{
    return loaded() ? dl.status_name(s) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char *cublasGetStatusString(cublasStatus_t s) { return loaded() ? dl.status_string(s) : dl.why; }

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                              float *c, int ldc)
{
    if (!loaded())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return dl.sgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *a, cudaDataType at, int lda, const void *b, cudaDataType bt,
                            int ldb, const void *beta, void *c, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    if (!loaded())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return dl.gemm_ex(h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo);
}

/* ---- cuBLASLt ---- */

#define LT_CALL(call) return loaded() ? (call) : CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { LT_CALL(dl.lt_create(h)); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { LT_CALL(dl.lt_destroy(h)); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale)
{
    LT_CALL(dl.desc_create(d, compute, scale));
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { LT_CALL(dl.desc_destroy(d)); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes)
{
    LT_CALL(dl.desc_set(d, attr, buf, bytes));
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    LT_CALL(dl.layout_create(l, type, rows, cols, ld));
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { LT_CALL(dl.layout_destroy(l)); }

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { LT_CALL(dl.pref_create(p)); }

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { LT_CALL(dl.pref_destroy(p)); }

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t bytes)
{
    LT_CALL(dl.pref_set(p, attr, buf, bytes));
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t res[], int *got)
{
    LT_CALL(dl.heuristic(h, d, a, b, c, dd, p, want, res, got));
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *a,
                              cublasLtMatrixLayout_t al, const void *b, cublasLtMatrixLayout_t bl, const void *beta,
                              const void *c, cublasLtMatrixLayout_t cl, void *dd, cublasLtMatrixLayout_t dl_,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes, cudaStream_t s)
{
    LT_CALL(dl.matmul(h, d, alpha, a, al, b, bl, beta, c, cl, dd, dl_, algo, ws, wsbytes, s));
}
