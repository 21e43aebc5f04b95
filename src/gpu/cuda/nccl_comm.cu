// The NCCL communicator and its collectives on device buffers (nccl_private.h; the gradient all-reduce is in
// nccl_grad.cu).
//
// Streams: the trainer computes on the compute stream (device.cu); every collective here runs on a
// dedicated communication stream (non-blocking, highest priority), ordered with events:
// - the comm stream waits on an event recorded on the compute stream when a bucket is enqueued;
// - the compute stream waits on an event recorded after the last collective, so the optimizer waits on the
//   last bucket only.
// The gradient all-reduce never makes the host wait: gpu_grad_comm_settle() does, once per log interval.
//
// Non-blocking communicator (config.blocking = 0): any NCCL call may return ncclInProgress; before the
// next NCCL call on the communicator we poll ncclCommGetAsyncError until it leaves ncclInProgress. Every
// wait (init, enqueue, completion) has the --comm-timeout deadline; on error or timeout we call
// ncclCommAbort (GPU kernels of the communicator return) and die() (MPI_Abort: every rank stops).
// No MPI here: src/gpu/gpu_mpi.c broadcasts the unique ID.
#include "config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/clock.h"
#include "comm/stall.h"
#include "gpu/cuda/comm_kernels.h"
#include "gpu/cuda/nccl_private.h"

static_assert(GPU_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "GPU_NCCL_ID_BYTES must equal NCCL_UNIQUE_ID_BYTES");
static_assert(sizeof(ncclUniqueId) == GPU_NCCL_ID_BYTES, "ncclUniqueId size changed");

// Spin briefly (a bucket often completes within microseconds), then sleep with growing intervals.
static void backoff(long spins)
{
    if (spins < 256)
        return;
    struct timespec ts = {0, spins < 4096 ? 20000L : 500000L};
    nanosleep(&ts, nullptr);
}

static void when(const gpu_comm *c, char *buf, size_t len)
{
    if (c->step < 0)
        snprintf(buf, len, "at start-up");
    else
        snprintf(buf, len, "at step %ld", c->step);
}

static void abort_comm(gpu_comm *c)
{
    if (c->comm)
        (void)ncclCommAbort(c->comm); // we are about to die; its own result cannot change that
    c->comm = nullptr;
}

[[noreturn]] static void nccl_fail(gpu_comm *c, ncclResult_t r, const char *op, const char *file, int line)
{
    char last[512], w[64];
    snprintf(last, sizeof last, "%s", c->comm ? ncclGetLastError(c->comm) : ncclGetLastError(nullptr));
    when(c, w, sizeof w);
    abort_comm(c);
    die_at(file, line, nccl_exit_code(r),
           "NCCL %s %s failed: %s%s%s; rerun with NCCL_DEBUG=INFO "
           "(NCCL_DEBUG_SUBSYS=INIT,NET) to see why",
           op, w, ncclGetErrorString(r), *last ? ": " : "", last);
}

// A deadline passed (or a peer's did: stall_poll). Before the communicator is up the hint is about reaching a
// peer; before the first step, that one is gone; after it, the ranks tell where they are (stall.h) and the line
// names the ranks that did not answer.
[[noreturn]] static void nccl_timeout(gpu_comm *c, const char *op, double waited, const char *file, int line)
{
    char w[64];
    when(c, w, sizeof w);
    abort_comm(c);
    if (!c->initialised)
        die_at(file, line, EX_UNAVAILABLE,
               "NCCL %s %s did not complete within %s %g s: a rank did not start, or "
               "this rank cannot reach rank 0's bootstrap address (firewall? NCCL_SOCKET_IFNAME? see "
               "--bootstrap-addr); rerun with NCCL_DEBUG=INFO to see where it waits",
               op, w, c->option, c->timeout_s);
    if (c->step < 0)
        die_at(file, line, EX_UNAVAILABLE,
               "NCCL %s %s did not complete within %s %g s: a peer rank died, stalled or diverged; rerun with "
               "NCCL_DEBUG=INFO to see where it waits",
               op, w, c->option, c->timeout_s);
    char what[64];
    snprintf(what, sizeof what, "NCCL %s", op);
    stall_wait sw = {what, c->step, -1, 0, waited, c->timeout_s, c->option};
    stall_die_at(file, line, &sw, "rerun with NCCL_DEBUG=INFO to see where NCCL waits");
}

// After an NCCL call on the communicator: its result, then the communicator's state until it leaves
// ncclInProgress (a non-blocking communicator may still be initialising, connecting or enqueuing).
void nccl_settle(gpu_comm *c, ncclResult_t r, const char *op, const char *file, int line)
{
    if (r != ncclSuccess && r != ncclInProgress)
        nccl_fail(c, r, op, file, line);
    double deadline = clock_now() + c->timeout_s;
    for (long spins = 0;; spins++) {
        ncclResult_t state = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError(c->comm, &state);
        if (q != ncclSuccess)
            nccl_fail(c, q, op, file, line);
        if (state == ncclSuccess)
            return;
        if (state != ncclInProgress)
            nccl_fail(c, state, op, file, line);
        if (clock_now() > deadline || ((spins & 255) == 255 && stall_poll()))
            nccl_timeout(c, op, clock_now() - deadline + c->timeout_s, file, line);
        backoff(spins);
    }
}

// Host wait for an event with the deadline, watching the communicator for asynchronous errors.
void wait_event(gpu_comm *c, cudaEvent_t ev, const char *op, const char *file, int line)
{
    double deadline = clock_now() + c->timeout_s;
    for (long spins = 0;; spins++) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess)
            return;
        if (q != cudaErrorNotReady) {
            char call[160];
            snprintf(call, sizeof call, "waiting for the %s (cudaEventQuery)", op);
            abort_comm(c);
            cuda_check_fail(q, call, file, line);
        }
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->comm, &state);
        if (r != ncclSuccess)
            nccl_fail(c, r, op, file, line);
        if (state != ncclSuccess && state != ncclInProgress)
            nccl_fail(c, state, op, file, line);
        if (clock_now() > deadline || ((spins & 255) == 255 && stall_poll()))
            nccl_timeout(c, op, clock_now() - deadline + c->timeout_s, file, line);
        backoff(spins);
    }
}

extern "C" void gpu_nccl_unique_id(unsigned char id[GPU_NCCL_ID_BYTES])
{
    ncclUniqueId u;
    NCCL_CHECK(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
}

extern "C" void gpu_comm_set_step_timeout(gpu_comm *c, double step_timeout_s) { c->step_timeout_s = step_timeout_s; }

extern "C" gpu_comm *gpu_comm_init(const unsigned char id[GPU_NCCL_ID_BYTES], int nranks, int rank, double timeout_s)
{
    int dev = gpu_bound_device();
    if (dev < 0)
        die(EX_SOFTWARE, "gpu_comm_init: no device bound (gpu_select() comes first)");
    gpu_comm *c = (gpu_comm *)xcalloc(1, sizeof *c);
    c->rank = rank;
    c->world = nranks;
    c->device = dev;
    c->timeout_s = c->startup_s = c->step_timeout_s = timeout_s;
    c->option = "--comm-timeout";
    c->step = -1;
    c->compute = (cudaStream_t)gpu_compute_stream();
    CUDA_CHECK(cudaSetDevice(dev)); // NCCL binds the communicator to the current device
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&c->t0));
    CUDA_CHECK(cudaEventCreate(&c->t1));
    CUDA_CHECK(cudaMalloc((void **)&c->dev_scalar, sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&c->host_scalar, sizeof(float)));

    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; // returns at once; we poll with a deadline instead of hanging in the bootstrap
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, uid, rank, &config);
    NCCL_ENQUEUE(c, r, "communicator initialisation (ncclCommInitRankConfig)"); // an error result fails here too
    c->initialised = 1;
    return c;
}

// Orders the comm stream after everything queued on the compute stream so far.
static void comm_after_compute(gpu_comm *c)
{
    CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
}

// Orders the compute stream after everything queued on the comm stream, and waits on the host.
static void compute_after_comm(gpu_comm *c, const char *op, const char *file, int line)
{
    CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    // Redundant while the host waits for the same event just below (an equivalent mutant: the simulation
    // cannot see it removed): wait_event() returns only once 'done' has completed, so nothing queued on
    // the compute stream afterwards can start earlier. Kept so the device order does not rest on the host
    // wait alone.
    CUDA_CHECK(cudaStreamWaitEvent(c->compute, c->done, 0));
    wait_event(c, c->done, op, file, line);
}

// One collective on a device buffer, between the compute stream's work before and after it: a broadcast from
// root, or (root < 0) an average over ranks.
static void buffer_collective(gpu_comm *c, float *dev, size_t n, int root, const char *what)
{
    if (!talks(c) || n == 0)
        return;
    char op[192];
    snprintf(op, sizeof op, "%s of %s", root >= 0 ? "broadcast" : "average", what ? what : "a device buffer");
    comm_after_compute(c);
    if (root >= 0)
        NCCL_ENQUEUE(c, ncclBroadcast(dev, dev, n, ncclFloat, root, c->comm, c->stream), op);
    else
        NCCL_ENQUEUE(c, ncclAllReduce(dev, dev, n, ncclFloat, ncclAvg, c->comm, c->stream), op);
    compute_after_comm(c, op, __FILE__, __LINE__);
}

extern "C" void gpu_comm_broadcast(gpu_comm *c, float *dev, size_t n, int root, const char *what)
{
    buffer_collective(c, dev, n, root, what);
}

extern "C" void gpu_comm_average(gpu_comm *c, float *dev, size_t n, const char *what)
{
    buffer_collective(c, dev, n, -1, what);
}

// The maximum of x over ranks (through the device: NCCL only reduces device memory).
static double max_over_ranks(gpu_comm *c, double x, const char *op)
{
    *c->host_scalar = (float)x;
    CUDA_CHECK(cudaMemcpyAsync(c->dev_scalar, c->host_scalar, sizeof(float), cudaMemcpyHostToDevice, c->stream));
    NCCL_ENQUEUE(c, ncclAllReduce(c->dev_scalar, c->dev_scalar, 1, ncclFloat, ncclMax, c->comm, c->stream), op);
    CUDA_CHECK(cudaMemcpyAsync(c->host_scalar, c->dev_scalar, sizeof(float), cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    WAIT_EVENT(c, c->done, op);
    return (double)*c->host_scalar;
}

extern "C" void gpu_comm_set_alone(gpu_comm *c) { c->alone = 1; }

extern "C" void gpu_comm_set_proxy(gpu_comm *c, const comm_proxy_spec *p) { c->proxy = *p; }

// The proxy's sink holds n floats (outside a capture: it may allocate).
void proxy_reserve(gpu_comm *c, size_t n)
{
    if (c->proxy.bus_gbps <= 0 || n <= c->sink_n)
        return;
    if (c->sink)
        CUDA_CHECK(cudaFree(c->sink)); // no proxy is queued: every user of the sink waited for it
    CUDA_CHECK(cudaMalloc((void **)&c->sink, n * sizeof(float)));
    c->sink_n = n;
}

// After an all-reduce of wire_bytes on the comm stream: the traffic the peers would add (gpu_comm_set_proxy),
// read from the n_floats at data.
void proxy_after(gpu_comm *c, const float *data, size_t n_floats, size_t wire_bytes)
{
    if (c->proxy.bus_gbps <= 0)
        return;
    size_t moved = (size_t)(comm_proxy_bytes(&c->proxy, (double)wire_bytes) / sizeof(float));
    comm_proxy(c->stream, data, n_floats, moved, c->sink,
               (unsigned long long)(1e9 * comm_proxy_seconds(&c->proxy, (double)wire_bytes)));
}

static size_t type_bytes(ncclDataType_t type) { return type == ncclBfloat16 ? 2 : sizeof(float); }

double time_allreduce(gpu_comm *c, void *dev, size_t n, ncclDataType_t type, int iters)
{
    if (!talks(c) || n == 0)
        return 0;
    if (iters < 1)
        iters = 1;
    const char *op = "timed all-reduce";
    size_t bytes = n * type_bytes(type);
    proxy_reserve(c, bytes / sizeof(float));
    comm_after_compute(c);
    for (int i = -1; i < iters; i++) { // i = -1: warm-up
        if (i == 0)
            CUDA_CHECK(cudaEventRecord(c->t0, c->stream));
        NCCL_ENQUEUE(c, ncclAllReduce(dev, dev, n, type, ncclSum, c->comm, c->stream), op);
        proxy_after(c, (const float *)dev, bytes / sizeof(float), bytes);
    }
    CUDA_CHECK(cudaEventRecord(c->t1, c->stream));
    compute_after_comm(c, op, __FILE__, __LINE__);
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->t0, c->t1));
    return max_over_ranks(c, 1e-3 * (double)ms / iters, op);
}

extern "C" double gpu_comm_time_allreduce(gpu_comm *c, float *dev, size_t n, int iters)
{
    return time_allreduce(c, dev, n, ncclFloat, iters);
}

extern "C" void gpu_comm_free(gpu_comm *c)
{
    if (!c)
        return;
    const char *op = "communicator shutdown (ncclCommFinalize)";
    // With the order of gpu.h the comm stream is idle here (an equivalent mutant: the simulation cannot see
    // this record removed). Every function that queues work on it waits for that work before returning,
    // but for the bucket launches, which gpu_grad_comm_finish() or gpu_grad_comm_free() (called first)
    // wait for. And ncclCommFinalize flushes the collectives still queued, under the same deadline and
    // message. Kept for a caller that frees the communicator first.
    CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    WAIT_EVENT(c, c->done, op);
    NCCL_ENQUEUE(c, ncclCommFinalize(c->comm), op); // flushes and waits for peers: deadline applies
    // Local and quick after ncclCommFinalize; ncclInProgress would only mean "freed in the background".
    ncclResult_t r = ncclCommDestroy(c->comm);
    if (r != ncclSuccess && r != ncclInProgress)
        nccl_check_fail(r, "ncclCommDestroy(c->comm)", __FILE__, __LINE__);
    c->comm = nullptr;
    CUDA_CHECK(cudaEventDestroy(c->ready));
    CUDA_CHECK(cudaEventDestroy(c->done));
    CUDA_CHECK(cudaEventDestroy(c->t0));
    CUDA_CHECK(cudaEventDestroy(c->t1));
    CUDA_CHECK(cudaFree(c->dev_scalar));
    CUDA_CHECK(cudaFreeHost(c->host_scalar));
    if (c->sink)
        CUDA_CHECK(cudaFree(c->sink));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}
