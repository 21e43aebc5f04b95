/* The simulated devices, NCCL, cuBLAS and pinned host memory of gpu_mock.h, and the failures a test injects into them
 * (streams, events and memory: tests/gpu/gpu_mock_stream.c). */
#include "gpu_mock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gpu_mock_state mock;

void mock_violate(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!mock.violations++) /* the first one: what follows may be its consequence */
        vsnprintf(mock.violation, sizeof mock.violation, fmt, ap);
    va_end(ap);
}

void mock_reset(int policy)
{
    memset(&mock, 0, sizeof mock);
    mock.policy = policy;
    mock.scalar_digest = 0xcbf29ce484222325ULL; /* FNV-1a's offset basis */
    mock.count = 2;
    mock.driver = 13000;
    mock.init_polls = 3;
    mock.coll_polls = 0;
    mock.finalize_polls = 2;
    mock.init_result = ncclSuccess;
    mock.coll_result = ncclSuccess;
    mock.async_error_after = -1;
    mock.async_error = ncclRemoteError;
    mock.peer_max = 0.25f;
    mock.init_device_seen = -1;
}

void mock_fail(const char *call, long skip, int err, int sticky)
{
    mock.fail.call = call;
    mock.fail.skip = skip;
    mock.fail.err = err;
    mock.fail.sticky = sticky;
}

int mock_injected(const char *call)
{
    if (!mock.fail.call || strcmp(call, mock.fail.call) != 0 || mock.fail.skip-- > 0)
        return 0;
    if (mock.fail.sticky)
        mock.sticky = (cudaError_t)mock.fail.err;
    return mock.fail.err;
}

cudaError_t mock_cuda_status(const char *call)
{
    cudaError_t e = (cudaError_t)mock_injected(call);
    return mock.sticky ? mock.sticky : e;
}

/* ---- CUDA runtime ----------------------------------------------------------------------------- */

void **__cudaRegisterFatBinary(void *fat);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
static void *fat_handle;
void **__cudaRegisterFatBinary(void *fat)
{
    (void)fat;
    return &fat_handle;
}
void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

/* The physical indices of the visible devices: 0..count-1, or with use_visible_devices the entries of
 * CUDA_VISIBLE_DEVICES up to the first that is not a valid index (CUDA's rule). */
static int visible(int phys[16])
{
    const char *cvd = mock.use_visible_devices ? getenv("CUDA_VISIBLE_DEVICES") : NULL;
    int n = 0;
    if (!cvd) {
        for (; n < mock.count && n < 16; n++)
            phys[n] = n;
        return n;
    }
    for (const char *p = cvd; *p && n < 16;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= mock.count)
            break;
        phys[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    int phys[16];
    const char *loading = getenv("CUDA_MODULE_LOADING"); /* what cuInit would see */
    snprintf(mock.module_loading, sizeof mock.module_loading, "%s", loading ? loading : "");
    if (mock.count_err != cudaSuccess)
        return mock.count_err;
    *count = visible(phys);
    return *count ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    *v = mock.driver;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return mock.sticky; }
const char *cudaGetErrorName(cudaError_t e)
{
    static const struct {
        cudaError_t e;
        const char *name;
    } names[] = {{cudaErrorIllegalAddress, "cudaErrorIllegalAddress"},
                 {cudaErrorECCUncorrectable, "cudaErrorECCUncorrectable"},
                 {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation"},
                 {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable"},
                 {cudaErrorInvalidDevice, "cudaErrorInvalidDevice"}};
    static char buf[32];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].e == e)
            return names[i].name;
    snprintf(buf, sizeof buf, "cudaError%d", (int)e);
    return buf;
}
const char *cudaGetErrorString(cudaError_t e)
{
    (void)e;
    return "mock error";
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    int phys[16], n = visible(phys);
    cudaError_t r = mock_cuda_status("cudaGetDeviceProperties");
    if (r != cudaSuccess)
        return r;
    if (device < 0 || device >= n)
        return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "Mock GPU %d", phys[device]);
    prop->major = 9;
    prop->totalGlobalMem = (size_t)80 << 30;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
    int phys[16], n = visible(phys);
    if (device < 0 || device >= n)
        return cudaErrorInvalidDevice;
    snprintf(id, (size_t)len, "0000:%02X:00.0", 0x10 + phys[device]);
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device)
{
    int phys[16];
    cudaError_t r = mock_cuda_status("cudaSetDevice");
    if (r != cudaSuccess)
        return r;
    if (device < 0 || device >= visible(phys))
        return cudaErrorInvalidDevice;
    mock.current_device = device;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    *least = 0;
    *greatest = -5;
    return cudaSuccess;
}

/* ---- NCCL ------------------------------------------------------------------------------------- */

ncclResult_t ncclGetVersion(int *v)
{
    *v = 22809;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    ncclResult_t r = (ncclResult_t)mock_injected("ncclGetUniqueId");
    if (r != ncclSuccess)
        return r;
    for (size_t i = 0; i < sizeof *id; i++) /* differs per process: a broadcast must carry it */
        id->internal[i] = (char)(getpid() + (int)i);
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "ncclResult %d", (int)r);
    return buf;
}
const char *ncclGetLastError(ncclComm_t c)
{
    (void)c;
    return "mock: last error";
}

static int usable(ncclComm_t c, const char *call)
{
    if (!c || c->aborted) {
        mock_violate("%s on an aborted or missing communicator", call);
        return 0;
    }
    if (c->state == ncclInProgress) {
        mock_violate("%s while the communicator is still ncclInProgress", call);
        return 0;
    }
    return 1;
}

static void go_in_progress(ncclComm_t c, long polls, ncclResult_t next)
{
    c->pending = polls;
    c->next = next;
    c->state = polls == 0 ? next : ncclInProgress;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    memcpy(mock.last_id, &id, sizeof mock.last_id);
    mock.init_blocking_seen = config->blocking;
    mock.init_device_seen = mock.current_device;
    ncclResult_t r = (ncclResult_t)mock_injected("ncclCommInitRankConfig");
    if (r != ncclSuccess) { /* rejected at once: no communicator */
        *comm = NULL;
        return r;
    }
    ncclComm_t c = calloc(1, sizeof *c);
    c->rank = rank;
    c->nranks = nranks;
    mock.nccl_rank = rank;
    go_in_progress(c, mock.init_polls, mock.init_result);
    *comm = c;
    return c->state == ncclInProgress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    if (!c || c->aborted) {
        mock_violate("ncclCommGetAsyncError on an aborted or missing communicator");
        return ncclInvalidArgument;
    }
    ncclResult_t r = (ncclResult_t)mock_injected("ncclCommGetAsyncError");
    if (r != ncclSuccess)
        return r;
    if (c->state == ncclInProgress && c->pending > 0 && --c->pending == 0)
        c->state = c->next;
    if (c->state == ncclSuccess && mock.async_error_after >= 0 && mock.polls_running++ >= mock.async_error_after)
        c->state = mock.async_error;
    *state = c->state;
    return ncclSuccess;
}

static ncclResult_t collective(ncclComm_t c, mock_op o, cudaStream_t s, const char *call)
{
    if (!usable(c, call))
        return ncclInvalidUsage;
    ncclResult_t r = (ncclResult_t)mock_injected(call);
    if (r != ncclSuccess)
        return r;
    if (mock.sticky)
        return ncclUnhandledCudaError;
    mock.collectives++;
    o.rank = c->rank;
    o.hang = mock.hang_collectives;
    mock_enqueue(s, o);
    go_in_progress(c, mock.coll_polls, mock.coll_result);
    return c->state == ncclInProgress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t redop,
                           ncclComm_t c, cudaStream_t s)
{
    if (send != recv || (type != ncclFloat && type != ncclBfloat16))
        mock_violate("all-reduce not in place or not float or bfloat16");
    int half = type == ncclBfloat16;
    mock_op o = {.kind = OP_ALLREDUCE, .buf = recv, .count = count, .redop = redop, .half = half};
    mock_trace(TR_ALLREDUCE, recv, count * (half ? 2 : sizeof(float)));
    return collective(c, o, s, "ncclAllReduce");
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t c,
                           cudaStream_t s)
{
    if (send != recv || type != ncclFloat)
        mock_violate("broadcast not in place or not float");
    return collective(c, (mock_op){.kind = OP_BCAST, .buf = recv, .count = count, .root = root}, s, "ncclBroadcast");
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    mock.abort_called = 1;
    if (c)
        c->aborted = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    if (!usable(c, "ncclCommFinalize"))
        return ncclInvalidUsage;
    ncclResult_t r = (ncclResult_t)mock_injected("ncclCommFinalize");
    if (r != ncclSuccess)
        return r;
    c->finalized = 1;
    go_in_progress(c, mock.finalize_polls, ncclSuccess);
    return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!usable(c, "ncclCommDestroy"))
        return ncclInvalidUsage;
    if (!c->finalized)
        mock_violate("ncclCommDestroy before ncclCommFinalize");
    ncclResult_t r = (ncclResult_t)mock_injected("ncclCommDestroy");
    if (r != ncclSuccess)
        return r;
    free(c);
    return ncclSuccess;
}

/* ---- cuBLAS ----------------------------------------------------------------------------------- */

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    cublasStatus_t r = (cublasStatus_t)mock_injected("cublasCreate");
    if (r != CUBLAS_STATUS_SUCCESS)
        return r;
    *h = calloc(1, sizeof **h);
    mock.blas_handles++;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    mock.blas_handles--;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    mock.blas_on_compute_stream = s && !MOCK_IS_COMM(s);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    (void)h;
    mock.blas_math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusName(cublasStatus_t s)
{
    (void)s;
    return "CUBLAS_STATUS_MOCK";
}
const char *cublasGetStatusString(cublasStatus_t s)
{
    (void)s;
    return "mock cuBLAS error";
}

/* cuBLAS's own argument checks: a wrong row-major -> column-major mapping shows up here. */
cublasStatus_t mock_gemm(cudaStream_t s, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc, const float *bias, int relu)
{
    int ra = !ta ? m : k, rb = !tb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    mock.gemms++;
    size_t stream = 0; /* which stream, from 1, for the step report */
    for (int i = 0; i < mock.nstreams && !stream; i++)
        stream = mock.streams[i] == s ? (size_t)i + 1 : 0;
    mock_trace(TR_GEMM, c, stream);
    mock_enqueue(s, (mock_op){.kind = OP_GEMM,
                              .ta = ta,
                              .tb = tb,
                              .m = m,
                              .n = n,
                              .k = k,
                              .alpha = alpha,
                              .a = a,
                              .lda = lda,
                              .b = b,
                              .ldb = ldb,
                              .beta = beta,
                              .c = c,
                              .ldc = ldc,
                              .bias = bias,
                              .relu = relu});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                              float *c, int ldc)
{
    return mock_gemm(h->stream, ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc,
                     NULL, 0);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *a, cudaDataType at, int lda, const void *b, cudaDataType bt,
                            int ldb, const void *beta, void *c, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)algo;
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    mock.gemm_ex_calls++;
    mock.gemm_ex_compute = compute;
    return mock_gemm(h->stream, ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, *(const float *)alpha, a, lda, b, ldb,
                     *(const float *)beta, c, ldc, NULL, 0);
}

/* Pinned host memory: a copy from it reads it when it runs; from any other host memory, when it is queued
 * (cudaMemcpyAsync). */
static struct pinned_block {
    const char *p;
    size_t bytes;
} * pinned;
static long npinned, cappinned;

int mock_is_pinned(const void *p)
{
    for (long i = 0; i < npinned; i++)
        if ((const char *)p >= pinned[i].p && (const char *)p < pinned[i].p + pinned[i].bytes)
            return 1;
    return 0;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    cudaError_t r = cudaMalloc(p, bytes);
    if (r != cudaSuccess)
        return r;
    if (npinned == cappinned) {
        cappinned = cappinned ? 2 * cappinned : 16;
        pinned = realloc(pinned, (size_t)cappinned * sizeof *pinned);
        if (!pinned)
            abort();
    }
    pinned[npinned++] = (struct pinned_block){*p, bytes};
    return r;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    (void)flags;
    return cudaMallocHost(p, bytes);
}
cudaError_t cudaFreeHost(void *p)
{
    for (long i = 0; i < npinned; i++)
        if (pinned[i].p == p)
            pinned[i] = pinned[--npinned];
    return cudaFree(p);
}
