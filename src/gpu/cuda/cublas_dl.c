/* cuBLAS opened when the GPU path first asks for it (dlopen), not linked. Linked, libcublas would make every
 * process, CPU-only runs and `--version` included, run its and libcublasLt's slow constructors at start-up
 * (docs/gpu.md). These definitions stand in for the cuBLAS functions src/gpu/cuda/gemm_cublas.cu calls and forward to
 * the library's. A new call needs its stand-in here: without one the link fails, cuBLAS not being linked. The
 * simulated runtime (tests/gpu/gpu_mock.c) defines the same names, so its programs never pull this object from
 * the archive. dlopen searches as the loader searched for a linked cuBLAS: LD_LIBRARY_PATH, the binary's run
 * path (configure's CUDA directory), the system's. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include <cublas_v2.h>

#include "gpu/cuda/cublas_dl.h"

#define CUBLAS_DL_STR_(x) #x
#define CUBLAS_DL_STR(x)  CUBLAS_DL_STR_(x)
#define CUBLAS_SONAME     "libcublas.so." CUBLAS_DL_STR(CUBLAS_VER_MAJOR)

static struct {
    int tried;
    void *lib;
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
} dl;

/* *fn = the library's NAME (a function pointer's object representation: ISO C has no cast from void *). */
static int sym(void *fn, const char *name, const char *lib)
{
    void *p = dlsym(dl.lib, name);
    if (!p)
        snprintf(dl.why, sizeof dl.why, "%s has no %s (not cuBLAS %d?)", lib, name, CUBLAS_VER_MAJOR);
    *(void **)fn = p;
    return p != NULL;
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
        sym(&dl.sgemm, "cublasSgemm_v2", lib) && sym(&dl.gemm_ex, "cublasGemmEx", lib))
        return 1;
    dlclose(dl.lib);
    dl.lib = NULL;
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
