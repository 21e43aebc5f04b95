/* The simulated CUDA streams, events and memory of gpu_mock.h.
 * - Streams are queues run by a scheduler that is adversarial on purpose (gpu_mock_state.policy): one
 *   kind of stream runs as far as its dependencies allow at once, the other only one operation per host
 *   poll. Events and cudaStreamWaitEvent have CUDA's snapshot semantics.
 * - A race detector: every operation names the memory it reads and writes; when it is queued, each
 *   earlier operation of another stream touching the same memory (one of them writing) must happen
 *   before it, through an event the stream waits on or a completion the host observed before queueing it.
 *   Otherwise some legal schedule runs them in the other order, whatever this run's policy did: a
 *   violation. Vector clocks (vc) carry "happens before" along streams, events and host waits.
 * - Device faults: a faulting kernel sets a sticky error when it runs; from then on nothing runs and every
 *   runtime call returns the error. */
#include "base/bf16.h"
#include "base/threads.h"
#include "gpu/cuda/comm_kernels.h"
#include "gpu/cuda/profile_stamps.h"
#include "gpu/kernels.h"
#include "gpu_mock.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_name[] = {
    "memcpy",       "memset", "stream wait",    "event record",  "all-reduce", "broadcast",           "GEMM",
    "kernel fault", "kernel", "bf16 narrowing", "bf16 widening", "step stamp", "communication proxy", "phase stamp"};

static const char *stream_name(const struct CUstream_st *s)
{
    return MOCK_IS_COMM(s) ? "communication stream" : "compute stream";
}

/* ---- Scheduler -------------------------------------------------------------------------------- */

static int eager(const struct CUstream_st *s)
{
    int comm = MOCK_IS_COMM(s);
    return mock.policy == EAGER_COMM ? comm : !comm;
}

static int runnable(const struct CUstream_st *s)
{
    if (s->done >= s->n || mock.sticky)
        return 0;
    const mock_op *o = &s->q[s->done];
    if (o->hang)
        return 0;
    if (o->kind == OP_WAIT)
        return o->wait_stream->done >= o->wait_pos;
    return 1;
}

static double gemm_b(const mock_op *o, int p, int j)
{
    return o->tb ? o->b[j + (size_t)p * o->ldb] : o->b[p + (size_t)j * o->ldb];
}

/* C = alpha op(A) op(B) + beta C, each element's sum in double over p in order (float products are exact in
 * double). Column by column, acc[i] += A(i,p) B(p,j) along a column of A (copied once where A is transposed),
 * so that the inner loop reads memory in order: the same sums as one dot product per element, 89% of a
 * simulated training's time when it strode across A. */
static void gemm_run(const mock_op *o)
{
    size_t m = (size_t)o->m;
    float *at = NULL;
    const float *a = o->a;
    size_t lda = (size_t)o->lda;
    if (o->ta) {
        at = malloc((m ? m : 1) * (size_t)(o->k ? o->k : 1) * sizeof *at);
        for (int p = 0; p < o->k; p++)
            for (size_t i = 0; i < m; i++)
                at[i + p * m] = o->a[p + i * lda];
        a = at, lda = m;
    }
    double *acc = malloc((m ? m : 1) * sizeof *acc);
    for (int j = 0; j < o->n; j++) {
        for (size_t i = 0; i < m; i++)
            acc[i] = 0;
        int p = 0;
        for (; p + 4 <= o->k; p += 4) { /* four p at a time, acc[i] held in a register: the same order */
            const float *a0 = a + (size_t)p * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
            double b0 = gemm_b(o, p, j), b1 = gemm_b(o, p + 1, j), b2 = gemm_b(o, p + 2, j), b3 = gemm_b(o, p + 3, j);
            SIMD
            for (size_t i = 0; i < m; i++)
                acc[i] =
                    (((acc[i] + (double)a0[i] * b0) + (double)a1[i] * b1) + (double)a2[i] * b2) + (double)a3[i] * b3;
        }
        for (; p < o->k; p++) {
            const float *ap = a + (size_t)p * lda;
            double bp = gemm_b(o, p, j);
            for (size_t i = 0; i < m; i++)
                acc[i] += (double)ap[i] * bp;
        }
        for (size_t i = 0; i < m; i++) {
            float *cij = &o->c[i + (size_t)j * o->ldc];
            *cij = (float)(o->alpha * acc[i] + (o->beta == 0 ? 0.0 : (double)o->beta * *cij));
            if (o->bias) /* cuBLASLt's epilogue: the bias of the row, then the ReLU */
                *cij = o->relu && !(*cij + o->bias[i] > 0) ? 0.0f : *cij + o->bias[i];
        }
    }
    free(acc);
    free(at);
}

/* The stamps of a replayed step (src/gpu/cuda/comm_kernels.cu), in the simulation's time. */
static void stamp_run(const mock_op *o)
{
    step_stamps *d = o->dst;
    unsigned long long now = 10000ULL * (unsigned long long)mock.time;
    if (!o->value) {
        d->backward_end_ns = now;
        return;
    }
    d->exposed_ns += now > d->backward_end_ns ? now - d->backward_end_ns : 0;
    d->steps++;
}

/* --profile's stamp (src/gpu/cuda/profile_clock.cu's k_phase_stamp), in the simulation's time. */
static void phase_stamp_run(const mock_op *o)
{
    phase_stamp_add(o->dst, o->value, 10000ULL * (unsigned long long)mock.time);
}

/* A kernel's read of the step's scalars, as kernels.h's kern_lr / kern_key pick it, into the digest. */
static void scalars_run(const mock_op *o)
{
    uint64_t v;
    if (o->reads == MOCK_READS_LR) {
        float by, lr;
        uint32_t bits;
        memcpy(&by, &o->by_value, sizeof by);
        lr = kern_lr(o->scalars, by);
        memcpy(&bits, &lr, sizeof bits);
        v = bits;
    } else {
        v = kern_key(o->scalars, o->by_value);
    }
    mock.scalar_reads++;
    for (int b = 0; b < 8; b++)
        mock.scalar_digest = (mock.scalar_digest ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
}

/* A 2-rank job: for a sum the peer holds the same data (each value doubles), for a max it holds
 * peer_max; a broadcast from the other rank brings 1000 + i. */
static void execute(struct CUstream_st *s)
{
    mock_op *o = &s->q[s->done];
    mock.time++;
    switch (o->kind) {
    case OP_MEMCPY:
        memcpy(o->dst, o->src, o->bytes);
        if (o->staged)
            free((void *)o->src);
        break;
    case OP_MEMSET:
        memset(o->dst, o->value, o->bytes);
        break;
    case OP_RECORD:
        if (o->ev->gen == o->gen)
            o->ev->time = mock.time;
        break;
    case OP_ALLREDUCE:
        for (size_t i = 0; o->half && i < o->count; i++) { /* bfloat16: the peer holds the same */
            uint16_t *h = (uint16_t *)(void *)o->buf;
            if (o->redop == ncclSum)
                h[i] = bf16_from_float(2.0f * float_from_bf16(h[i]));
        }
        for (size_t i = 0; !o->half && i < o->count; i++)
            if (o->redop == ncclSum)
                o->buf[i] *= 2.0f;
            else if (o->redop == ncclMax && mock.peer_max > o->buf[i])
                o->buf[i] = mock.peer_max;
        break;
    case OP_GEMM:
        gemm_run(o);
        break;
    case OP_NARROW:
        for (size_t i = 0; i < o->count; i++)
            ((uint16_t *)o->dst)[i] = bf16_from_float(((const float *)o->src)[i]);
        break;
    case OP_WIDEN:
        for (size_t i = 0; i < o->count; i++)
            ((float *)o->dst)[i] = float_from_bf16(((const uint16_t *)o->src)[i]);
        break;
    case OP_STAMP:
        stamp_run(o);
        break;
    case OP_PHASE_STAMP:
        phase_stamp_run(o);
        break;
    case OP_PROXY:
        memcpy(o->dst, o->src, o->count * sizeof(float));
        mock.proxies++;
        mock.proxy_read = o->count;
        mock.proxy_moved = o->moved;
        mock.proxy_ns = o->ns;
        break;
    case OP_BCAST:
        if (o->root != o->rank && !mock.bcast_keep)
            for (size_t i = 0; i < o->count; i++)
                o->buf[i] = 1000.0f + (float)i;
        break;
    case OP_FAULT:
        mock.sticky = o->fault;
        break;
    case OP_KERNEL:
        if (o->reads)
            scalars_run(o);
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

/* ---- Race detector ---------------------------------------------------------------------------- */

typedef struct {
    const char *p;
    size_t bytes;
    int write;
} access;

/* Bytes of a column-major rows x cols matrix with leading dimension ld. */
static size_t span(int ld, int rows, int cols)
{
    return rows > 0 && cols > 0 ? ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float) : 0;
}

/* The memory o reads and writes (a collective reads and writes its whole buffer, on every rank). */
static int accesses(const mock_op *o, access acc[4])
{
    switch (o->kind) {
    case OP_MEMCPY:
        acc[0] = (access){o->src, o->bytes, 0};
        acc[1] = (access){o->dst, o->bytes, 1};
        return 2;
    case OP_MEMSET:
        acc[0] = (access){o->dst, o->bytes, 1};
        return 1;
    case OP_NARROW:
    case OP_WIDEN:
        acc[0] = (access){o->src, o->count * (o->kind == OP_NARROW ? sizeof(float) : 2), 0};
        acc[1] = (access){o->dst, o->count * (o->kind == OP_NARROW ? 2 : sizeof(float)), 1};
        return 2;
    case OP_STAMP: /* the end stamp reads backward_end_ns and writes the rest: all of it, for the detector */
        acc[0] = (access){o->dst, o->value ? sizeof(step_stamps) : sizeof(unsigned long long), 1};
        return 1;
    case OP_PHASE_STAMP:
        acc[0] = (access){o->dst, sizeof(phase_stamps), 1};
        return 1;
    case OP_PROXY:
        acc[0] = (access){o->src, o->count * sizeof(float), 0};
        acc[1] = (access){o->dst, o->count * sizeof(float), 1};
        return 2;
    case OP_ALLREDUCE:
    case OP_BCAST:
        acc[0] = (access){(const char *)o->buf, o->count * (o->half ? 2 : sizeof(float)), 1};
        return 1;
    case OP_GEMM:
        acc[0] = (access){(const char *)o->a, o->ta ? span(o->lda, o->k, o->m) : span(o->lda, o->m, o->k), 0};
        acc[1] = (access){(const char *)o->b, o->tb ? span(o->ldb, o->n, o->k) : span(o->ldb, o->k, o->n), 0};
        acc[2] = (access){(const char *)o->c, span(o->ldc, o->m, o->n), 1};
        acc[3] = (access){(const char *)o->bias, o->bias ? (size_t)o->m * sizeof(float) : 0, 0};
        return 4;
    case OP_KERNEL: /* the detector sees only what the simulation runs: the step's scalars */
        if (!o->scalars)
            return 0;
        acc[0] = (access){o->scalars, sizeof(kern_scalars), 0};
        return 1;
    default:
        return 0;
    }
}

static int conflict(const mock_op *x, const mock_op *y)
{
    access a[4], b[4];
    int na = accesses(x, a), nb = accesses(y, b);
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if ((a[i].write || b[j].write) && a[i].p < b[j].p + b[j].bytes && b[j].p < a[i].p + a[i].bytes)
                return 1;
    return 0;
}

/* o is about to be queued on s, whose vc is already up to date. An operation queued later cannot be
 * ordered before an earlier one (events are snapshots), so each conflicting pair must be ordered this way. */
static void check_races(const struct CUstream_st *s, const mock_op *o)
{
    for (int t = 0; t < mock.nstreams; t++) {
        const struct CUstream_st *u = mock.streams[t];
        if (u == s)
            continue;
        for (long i = s->vc[t]; i < u->n; i++)
            if (conflict(&u->q[i], o)) {
                mock_violate("race: %s on the %s may run before %s queued earlier on the %s (nothing orders "
                             "them)",
                             kind_name[o->kind], stream_name(s), kind_name[u->q[i].kind], stream_name(u));
                return;
            }
    }
}

static void join(long *into, const long *from)
{
    for (int t = 0; t < MOCK_STREAMS; t++)
        if (from[t] > into[t])
            into[t] = from[t];
}

cudaError_t mock_enqueue(struct CUstream_st *s, mock_op o)
{
    if (!s) {
        mock_violate("%s on the legacy default stream", kind_name[o.kind]);
        return cudaErrorInvalidResourceHandle;
    }
    if (s->capture)
        return mock_graph_add(s, o);
    join(s->vc, mock.host_vc); /* queued after the host saw that work complete */
    check_races(s, &o);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->q = realloc(s->q, (size_t)s->cap * sizeof *s->q);
    }
    s->q[s->n++] = o;
    s->vc[s->id] = s->n;
    progress(0);
    return cudaSuccess;
}

void mock_fault_kernel(cudaStream_t s, cudaError_t e) { mock_enqueue(s, (mock_op){.kind = OP_FAULT, .fault = e}); }

/* ---- CUDA runtime: streams, events, memory ---------------------------------------------------- */

/* Runs every stream to the end, like the implicit device synchronisation of cudaFree: work that can
 * never complete would hang there with no deadline. */
static cudaError_t sync_device(const char *call)
{
    cudaError_t refused = mock_capture_refuse(call, 0);
    if (refused != cudaSuccess)
        return refused;
    for (int i = 0; i < mock.nstreams; i++)
        if (mock.streams[i]->done < mock.streams[i]->n) {
            mock_trace(TR_WAIT, NULL, 0);
            break;
        }
    for (;;) {
        long before = mock.time;
        progress(1);
        if (mock.sticky)
            return mock.sticky;
        int idle = 1;
        for (int i = 0; i < mock.nstreams; i++)
            idle &= mock.streams[i]->done == mock.streams[i]->n;
        if (idle)
            break;
        if (mock.time == before) {
            mock_violate("%s waits for device work that never completes: a hang no deadline covers", call);
            return cudaSuccess;
        }
    }
    for (int i = 0; i < mock.nstreams; i++)
        join(mock.host_vc, mock.streams[i]->vc);
    return cudaSuccess;
}

/* Host waits the code under test must not need in a step: each counts (when device work is pending). */
cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t r = mock_cuda_status("cudaDeviceSynchronize");
    return r == cudaSuccess ? sync_device("cudaDeviceSynchronize") : r;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    (void)kind;
    cudaError_t r = mock_cuda_status("cudaMemcpy");
    if (r == cudaSuccess)
        r = sync_device("cudaMemcpy"); /* blocking: after all earlier work of every blocking stream */
    if (r == cudaSuccess)
        memcpy(dst, src, bytes);
    return r;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    cudaError_t r = mock_cuda_status("cudaMalloc");
    if (r == cudaSuccess)
        r = mock_capture_refuse("cudaMalloc", 1);
    if (r != cudaSuccess)
        return r;
    *p = calloc(1, bytes ? bytes : 1);
    mock_trace(TR_ALLOC, *p, bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
    cudaError_t r = mock_cuda_status("cudaFree");
    if (r == cudaSuccess)
        r = sync_device("cudaFree");
    if (r == cudaSuccess)
        free(p);
    return r;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
    cudaError_t r = mock_cuda_status("cudaStreamCreateWithPriority");
    if (r != cudaSuccess)
        return r;
    if (mock.nstreams == MOCK_STREAMS)
        return cudaErrorMemoryAllocation;
    struct CUstream_st *st = calloc(1, sizeof *st);
    st->flags = flags;
    st->priority = priority;
    st->id = mock.nstreams;
    if (priority < 0) {
        mock.comm_flags_ok = (flags & cudaStreamNonBlocking) != 0;
        mock.comm_priority_seen = priority;
    } else {
        mock.compute_flags_ok = (flags & cudaStreamNonBlocking) != 0;
    }
    mock.streams[mock.nstreams++] = st;
    *s = st;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    (void)s; /* kept: CUDA releases it once its work is done */
    return mock_cuda_status("cudaStreamDestroy");
}
/* The host blocks until done(what): the scheduler runs the streams meanwhile; then the host has seen
 * everything up to clock vc. */
static cudaError_t host_wait(const char *call, int (*done)(const void *), const void *what, const long *vc)
{
    cudaError_t r = mock_cuda_status(call);
    if (r == cudaSuccess)
        r = mock_capture_refuse(call, 0);
    if (r == cudaSuccess && !done(what))
        mock_trace(TR_WAIT, NULL, 0);
    while (r == cudaSuccess && !done(what)) {
        long before = mock.time;
        progress(1);
        if (mock.sticky)
            return mock.sticky;
        if (mock.time == before)
            return cudaErrorLaunchTimeout; /* nothing can run: a deadlock */
    }
    if (r == cudaSuccess)
        join(mock.host_vc, vc);
    return r;
}

static int stream_idle(const void *p)
{
    const struct CUstream_st *s = p;
    return s->done >= s->n;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) { return host_wait("cudaStreamSynchronize", stream_idle, s, s->vc); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    cudaError_t r = mock_cuda_status("cudaEventCreateWithFlags");
    if (r != cudaSuccess)
        return r;
    *e = calloc(1, sizeof **e);
    (*e)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    e->destroyed = 1; /* kept: a queued record may still complete it (CUDA releases it afterwards) */
    return mock_cuda_status("cudaEventDestroy");
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    cudaError_t r = mock_cuda_status("cudaEventRecord");
    if (r != cudaSuccess)
        return r;
    if (e->destroyed)
        mock_violate("cudaEventRecord on a destroyed event");
    if (s && s->capture)
        return mock_graph_record(e, s);
    e->capture = NULL; /* its last record is on a stream */
    if (s) {
        e->gen++;
        e->s = s;
        e->pos = s->n + 1;
    }
    r = mock_enqueue(s, (mock_op){.kind = OP_RECORD, .ev = e, .gen = e->gen});
    if (s)
        memcpy(e->vc, s->vc, sizeof e->vc);
    return r;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)flags;
    cudaError_t r = mock_cuda_status("cudaStreamWaitEvent");
    if (r == cudaSuccess && ((s && s->capture) || (e->capture && e->capture == mock.capture)))
        return mock_graph_wait(s, e);
    if (r != cudaSuccess || !e->s)
        return r; /* never recorded: nothing to wait for */
    if (s)
        join(s->vc, e->vc);
    return mock_enqueue(s, (mock_op){.kind = OP_WAIT, .wait_stream = e->s, .wait_pos = e->pos});
}

static int event_complete(const struct CUevent_st *e) { return !e->s || e->s->done >= e->pos; }

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    cudaError_t r = mock_cuda_status("cudaEventQuery");
    if (r == cudaSuccess)
        r = mock_capture_refuse("cudaEventQuery", 0);
    if (r != cudaSuccess)
        return r;
    if (!event_complete(e) && e->waited != e->gen) {
        e->waited = e->gen;
        mock_trace(TR_WAIT, NULL, 0);
    }
    progress(1);
    if (mock.sticky) /* a fault that ran during this poll */
        return mock.sticky;
    if (!event_complete(e))
        return cudaErrorNotReady;
    join(mock.host_vc, e->vc);
    return cudaSuccess;
}
static int event_done(const void *e) { return event_complete(e); }

cudaError_t cudaEventSynchronize(cudaEvent_t e) { return host_wait("cudaEventSynchronize", event_done, e, e->vc); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t r = mock_cuda_status("cudaEventElapsedTime");
    if (r != cudaSuccess)
        return r;
    if ((a->flags | b->flags) & cudaEventDisableTiming)
        return cudaErrorInvalidResourceHandle;
    if (!a->s || !b->s || !event_complete(a) || !event_complete(b))
        return cudaErrorNotReady;
    *ms = 0.01f * (float)(b->time - a->time);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    cudaError_t r = mock_cuda_status("cudaMemcpyAsync");
    if (r != cudaSuccess)
        return r;
    if (kind == cudaMemcpyDeviceToDevice)
        mock_trace(TR_COPY, dst, bytes);
    /* From pageable memory CUDA stages the source before returning: the host may rewrite it at once. A captured
     * copy reads its source when replayed (the tests' stand-in for a kernel's write). */
    if (kind != cudaMemcpyHostToDevice || mock_is_pinned(src) || (s && s->capture))
        return mock_enqueue(s, (mock_op){.kind = OP_MEMCPY, .dst = dst, .src = src, .bytes = bytes});
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        abort();
    memcpy(copy, src, bytes);
    r = mock_enqueue(s, (mock_op){.kind = OP_MEMCPY, .dst = dst, .src = copy, .bytes = bytes, .staged = 1});
    if (r != cudaSuccess)
        free(copy);
    return r;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    cudaError_t r = mock_cuda_status("cudaMemsetAsync");
    if (r != cudaSuccess)
        return r;
    mock_trace(TR_MEMSET, dst, bytes);
    return mock_enqueue(s, (mock_op){.kind = OP_MEMSET, .dst = dst, .value = value, .bytes = bytes});
}
