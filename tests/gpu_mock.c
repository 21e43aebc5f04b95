/* The simulated CUDA runtime and NCCL of gpu_mock.h. */
#include "gpu_mock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gpu_mock_state mock;

static void violate(const char *what)
{
    mock.violations++;
    snprintf(mock.violation, sizeof mock.violation, "%s", what);
}

void mock_reset(int policy)
{
    memset(&mock, 0, sizeof mock);
    mock.policy = policy;
    mock.count = 2;
    mock.driver = 13000;
    mock.init_polls = 3;
    mock.coll_polls = 0;
    mock.init_result = ncclSuccess;
    mock.async_error_after = -1;
    mock.init_device_seen = -1;
}

static int eager(const struct CUstream_st *s)
{
    int comm = (s->flags & cudaStreamNonBlocking) != 0;
    return mock.policy == EAGER_COMM ? comm : !comm;
}

static int runnable(const struct CUstream_st *s)
{
    if (s->done >= s->n)
        return 0;
    const mock_op *o = &s->q[s->done];
    if (o->kind == OP_HANG)
        return 0;
    if (o->kind == OP_WAIT)
        return o->wait_stream->done >= o->wait_pos;
    return 1;
}

static void execute(struct CUstream_st *s)
{
    mock_op *o = &s->q[s->done];
    mock.time++;
    switch (o->kind) {
    case OP_MEMCPY:
        memcpy(o->dst, o->src, o->bytes);
        break;
    case OP_MEMSET:
        memset(o->dst, o->value, o->bytes);
        break;
    case OP_RECORD:
        if (o->ev->gen == o->gen)
            o->ev->time = mock.time;
        break;
    case OP_ALLREDUCE: /* 2 ranks holding the same data */
        if (o->redop == ncclSum)
            for (size_t i = 0; i < o->count; i++)
                o->buf[i] *= 2.0f;
        break;
    case OP_GEMM:
        for (int j = 0; j < o->n; j++)
            for (int i = 0; i < o->m; i++) {
                double acc = 0;
                for (int p = 0; p < o->k; p++)
                    acc += (double)(o->ta ? o->a[p + (size_t)i * o->lda] : o->a[i + (size_t)p * o->lda]) *
                         (o->tb ? o->b[j + (size_t)p * o->ldb] : o->b[p + (size_t)j * o->ldb]);
                float *cij = &o->c[i + (size_t)j * o->ldc];
                *cij = (float)(o->alpha * acc + (o->beta == 0 ? 0.0 : (double)o->beta * *cij));
            }
        break;
    case OP_BCAST: /* the root's data arrives */
        if (o->root != o->rank)
            for (size_t i = 0; i < o->count; i++)
                o->buf[i] = 1000.0f + (float)i;
        break;
    default:
        break;
    }
    s->done++;
}

/* Eager streams run as far as they can; a poll also moves one lazy stream by one operation. */
static void progress(int poll)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < mock.nstreams; i++)
            while (eager(mock.streams[i]) && runnable(mock.streams[i])) {
                execute(mock.streams[i]);
                again = 1;
            }
        if (poll) {
            for (int i = 0; i < mock.nstreams; i++)
                if (!eager(mock.streams[i]) && runnable(mock.streams[i])) {
                    execute(mock.streams[i]);
                    again = 1;
                    break;
                }
            poll = 0;
        }
    }
}

static cudaError_t enqueue(struct CUstream_st *s, mock_op o)
{
    if (!s) {
        violate("operation on the legacy default stream");
        return cudaErrorInvalidResourceHandle;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->q = realloc(s->q, (size_t)s->cap * sizeof *s->q);
    }
    s->q[s->n++] = o;
    progress(0);
    return cudaSuccess;
}

static int event_complete(const struct CUevent_st *e) { return !e->s || e->s->done >= e->pos; }

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
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e)
{
    static char buf[32];
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
    if (device < 0 || device >= visible(phys))
        return cudaErrorInvalidDevice;
    mock.current_device = device;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    *least = 0;
    *greatest = -5;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
    struct CUstream_st *st = calloc(1, sizeof *st);
    st->flags = flags;
    st->priority = priority;
    if (flags & cudaStreamNonBlocking) {
        mock.comm_flags_ok = 1;
        mock.comm_priority_seen = priority;
    }
    mock.streams[mock.nstreams++] = st;
    *s = st;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    (void)s; /* kept: late operations would still find it */
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    while (s->done < s->n) {
        long before = mock.time;
        progress(1);
        if (mock.time == before)
            return cudaErrorLaunchTimeout; /* nothing can run: a deadlock */
    }
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    *e = calloc(1, sizeof **e);
    (*e)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!s) {
        violate("event recorded on the legacy default stream");
        return cudaErrorInvalidResourceHandle;
    }
    e->gen++;
    e->s = s;
    e->pos = s->n + 1;
    return enqueue(s, (mock_op){.kind = OP_RECORD, .ev = e, .gen = e->gen});
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    if (!e->s)
        return cudaSuccess; /* never recorded: nothing to wait for */
    return enqueue(s, (mock_op){.kind = OP_WAIT, .wait_stream = e->s, .wait_pos = e->pos});
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    progress(1);
    return event_complete(e) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if ((a->flags | b->flags) & cudaEventDisableTiming)
        return cudaErrorInvalidResourceHandle;
    if (!a->s || !b->s || !event_complete(a) || !event_complete(b))
        return cudaErrorNotReady;
    *ms = 0.01f * (float)(b->time - a->time);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    return enqueue(s, (mock_op){.kind = OP_MEMCPY, .dst = dst, .src = src, .bytes = bytes});
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    return enqueue(s, (mock_op){.kind = OP_MEMSET, .dst = dst, .value = value, .bytes = bytes});
}

/* ---- NCCL ------------------------------------------------------------------------------------- */

ncclResult_t ncclGetVersion(int *v)
{
    *v = 22809;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
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
    char what[128];
    if (!c || c->aborted) {
        snprintf(what, sizeof what, "%s on an aborted or missing communicator", call);
        violate(what);
        return 0;
    }
    if (c->state == ncclInProgress) {
        snprintf(what, sizeof what, "%s while the communicator is still ncclInProgress", call);
        violate(what);
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
    ncclComm_t c = calloc(1, sizeof *c);
    c->rank = rank;
    c->nranks = nranks;
    go_in_progress(c, mock.init_polls, mock.init_result);
    *comm = c;
    return c->state == ncclInProgress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    if (!c || c->aborted) {
        violate("ncclCommGetAsyncError on an aborted or missing communicator");
        return ncclInvalidArgument;
    }
    if (c->state == ncclInProgress && c->pending > 0 && --c->pending == 0)
        c->state = c->next;
    if (c->state == ncclSuccess && mock.async_error_after >= 0 && mock.polls_running++ >= mock.async_error_after)
        c->state = ncclRemoteError;
    *state = c->state;
    return ncclSuccess;
}

static ncclResult_t collective(ncclComm_t c, mock_op o, cudaStream_t s, const char *call)
{
    if (!usable(c, call))
        return ncclInvalidUsage;
    mock.collectives++;
    o.rank = c->rank;
    if (mock.hang_collectives)
        o.kind = OP_HANG;
    enqueue(s, o);
    go_in_progress(c, mock.coll_polls, ncclSuccess);
    return c->state == ncclInProgress ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t redop,
                           ncclComm_t c, cudaStream_t s)
{
    if (send != recv || type != ncclFloat)
        violate("all-reduce not in place or not float");
    return collective(c, (mock_op){.kind = OP_ALLREDUCE, .buf = recv, .count = count, .redop = redop}, s, "ncclAllReduce");
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t c,
                           cudaStream_t s)
{
    if (send != recv || type != ncclFloat)
        violate("broadcast not in place or not float");
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
    c->finalized = 1;
    go_in_progress(c, 2, ncclSuccess);
    return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!usable(c, "ncclCommDestroy"))
        return ncclInvalidUsage;
    if (!c->finalized)
        violate("ncclCommDestroy before ncclCommFinalize");
    free(c);
    return ncclSuccess;
}


/* ---- cuBLAS ----------------------------------------------------------------------------------- */

struct cublasContext {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
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
    mock.blas_on_compute_stream = s && !(s->flags & cudaStreamNonBlocking);
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
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    int ra = ta == CUBLAS_OP_N ? m : k, rb = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    mock.gemms++;
    enqueue(h->stream, (mock_op){.kind = OP_GEMM, .ta = ta != CUBLAS_OP_N, .tb = tb != CUBLAS_OP_N, .m = m, .n = n,
                                 .k = k, .alpha = alpha, .a = a, .lda = lda, .b = b, .ldb = ldb, .beta = beta,
                                 .c = c, .ldc = ldc});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                              float *c, int ldc)
{
    return gemm(h, ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
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
    return gemm(h, ta, tb, m, n, k, *(const float *)alpha, a, lda, b, ldb, *(const float *)beta, c, ldc);
}
