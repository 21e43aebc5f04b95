// NCCL communicator and the bucketed gradient all-reduce for device buffers (mirrors src/comm/comm_mpi.c).
//
// Streams: the trainer computes on the compute stream (device.cu); every collective here runs on a
// dedicated communication stream (non-blocking, highest priority), ordered with events: the comm stream
// waits on an event recorded on the compute stream when a bucket is enqueued, and the compute stream
// waits on an event recorded after the last collective, so the optimizer waits on the last bucket only.
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

#include "base/bf16.h"
#include "base/clock.h"
#include "comm/stall.h"
#include "cuda_check.h"
#include "gpu/gpu.h"

static_assert(GPU_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "GPU_NCCL_ID_BYTES must equal NCCL_UNIQUE_ID_BYTES");
static_assert(sizeof(ncclUniqueId) == GPU_NCCL_ID_BYTES, "ncclUniqueId size changed");

struct gpu_comm {
    ncclComm_t comm;
    int rank, world, device;
    double timeout_s;                 // the bound of each wait now: startup_s, then comm_wait_deadline() after a step
    double startup_s, step_timeout_s; // --comm-timeout, --step-timeout
    const char *option;               // the option that set timeout_s, for messages
    long step;                        // the last armed step, for messages; -1 before the first
    int initialised;                  // ncclCommInitRankConfig completed (selects the hint of a timeout)
    int alone;                        // one rank communicates as with peers (gpu_comm_set_alone)
    cudaStream_t compute;             // the trainer's (not owned)
    cudaStream_t stream;              // communication stream (owned)
    cudaEvent_t ready, done;          // ordering (timing disabled)
    cudaEvent_t t0, t1;               // timing
    float *dev_scalar, *host_scalar;  // one float for max-over-ranks (host side pinned: no blocking copy)
};

// Whether collectives run: with peers, or alone on request.
static int talks(const gpu_comm *c) { return c->world > 1 || c->alone; }

// Timed steps in flight: the host may run this many steps ahead of the GPU before finish() waits for the
// oldest (CUDA's launch queue, about a thousand operations, throttles it sooner anyway).
enum { TIMING_SLOTS = 64 };

struct gpu_grad_comm {
    gpu_comm *c;
    float *grads;
    size_t n;
    bucket_plan plan;
    int armed, pass_buckets;
    cudaEvent_t ready;   // end of the kernels of a bucket (timing disabled)
    cudaEvent_t settled; // end of the compute stream's queue at gpu_grad_comm_settle (timing disabled)
    // Per step, a ring: end of backward / of the last bucket (timed: exposed time). Steps posted, timed.
    cudaEvent_t bwd_end[TIMING_SLOTS], done[TIMING_SLOTS];
    long posted, timed;
    // A captured step (the trainer's CUDA graph): its buckets, and per launch a ring of untimed events at
    // the end of the replay, which bounds how far the host runs ahead. Replays launched, settled.
    int graph_buckets;
    cudaEvent_t joined, replay_end[TIMING_SLOTS];
    long replays, replays_settled;
    uint16_t *wire; // --grad-comm bf16: the exchanged gradients (device); NULL: fp32 in place
    comm_stats stats;
};

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
static void nccl_settle(gpu_comm *c, ncclResult_t r, const char *op, const char *file, int line)
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
#define NCCL_ENQUEUE(c, call, op) nccl_settle((c), (call), (op), __FILE__, __LINE__)

// Host wait for an event with the deadline, watching the communicator for asynchronous errors.
static void wait_event(gpu_comm *c, cudaEvent_t ev, const char *op, const char *file, int line)
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
#define WAIT_EVENT(c, ev, op) wait_event((c), (ev), (op), __FILE__, __LINE__)

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

static double time_allreduce(gpu_comm *c, void *dev, size_t n, ncclDataType_t type, int iters)
{
    if (!talks(c) || n == 0)
        return 0;
    if (iters < 1)
        iters = 1;
    const char *op = "timed all-reduce";
    comm_after_compute(c);
    NCCL_ENQUEUE(c, ncclAllReduce(dev, dev, n, type, ncclSum, c->comm, c->stream), op); // warm-up
    CUDA_CHECK(cudaEventRecord(c->t0, c->stream));
    for (int i = 0; i < iters; i++)
        NCCL_ENQUEUE(c, ncclAllReduce(dev, dev, n, type, ncclSum, c->comm, c->stream), op);
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
    // this record removed): every function that queues work on it waits for that work before returning,
    // but for the bucket launches, which gpu_grad_comm_finish() or gpu_grad_comm_free() (called first)
    // wait for; and ncclCommFinalize flushes the collectives still queued, under the same deadline and
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
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

// ---- Gradient all-reduce --------------------------------------------------------------------------

// Adds the exposed time of the posted steps up to 'upto' (their events have completed: the host waited).
static void add_exposed(gpu_grad_comm *g, long upto)
{
    for (; g->timed < upto; g->timed++) {
        int slot = (int)(g->timed % TIMING_SLOTS);
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, g->bwd_end[slot], g->done[slot]));
        g->stats.exposed_s += ms > 0 ? 1e-3 * (double)ms : 0;
    }
}

// gpu_wait_compute() while g exists. One event at the end of the compute stream: that stream waits on every
// 'done', so this one wait covers the all-reduces (under the deadline, watching NCCL's errors) and
// everything the trainer queued; then the steps' exposed times can be read.
static void settle(void *ctx)
{
    gpu_grad_comm *g = (gpu_grad_comm *)ctx;
    CUDA_CHECK(cudaEventRecord(g->settled, g->c->compute));
    WAIT_EVENT(g->c, g->settled, "gradient all-reduce");
    add_exposed(g, g->posted);
    g->replays_settled = g->replays;
}

// Reference for the overlap figure: the best of three isolated all-reduces of n elements at dev (each the
// maximum over ranks); dev's content is overwritten.
static double blocking_time(gpu_comm *c, void *dev, size_t n, ncclDataType_t type)
{
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        double t = time_allreduce(c, dev, n, type, 1);
        best = t < best ? t : best;
    }
    return best;
}

// --grad-comm bf16: the gradients cross the wire as bfloat16, rounded by base/bf16.h as on the CPU path.
__global__ static void narrow_bf16(size_t n, const float *in, uint16_t *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bf16_from_float(in[i]);
}

__global__ static void widen_bf16(size_t n, const uint16_t *in, float *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = float_from_bf16(in[i]);
}

enum { WIRE_THREADS = 256 };

static unsigned wire_blocks(size_t n)
{
    size_t b = (n + WIRE_THREADS - 1) / WIRE_THREADS;
    return (unsigned)(b < 1 ? 1 : b < 4096 ? b : 4096); // grid-stride loops cover the rest
}

extern "C" gpu_grad_comm *gpu_grad_comm_create(gpu_comm *c, float *dev_grads, size_t n, size_t bucket_bytes)
{
    gpu_grad_comm *g = (gpu_grad_comm *)xcalloc(1, sizeof *g);
    g->c = c;
    g->grads = dev_grads;
    g->n = n;
    bucket_init(&g->plan, n, bucket_bytes / sizeof(float));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->settled, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->joined, cudaEventDisableTiming));
    for (int i = 0; i < TIMING_SLOTS; i++) {
        CUDA_CHECK(cudaEventCreate(&g->bwd_end[i]));
        CUDA_CHECK(cudaEventCreate(&g->done[i]));
        CUDA_CHECK(cudaEventCreateWithFlags(&g->replay_end[i], cudaEventDisableTiming));
    }
    if (talks(c) && n > 0) {
        // A scratch copy: the gradients may hold anything now.
        float *scratch = nullptr;
        CUDA_CHECK(cudaMalloc((void **)&scratch, n * sizeof(float)));
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, n * sizeof(float), c->compute));
        g->stats.blocking_s = blocking_time(c, scratch, n, ncclFloat);
        CUDA_CHECK(cudaFree(scratch)); // the timed operations were waited for
    }
    gpu_set_compute_wait(settle, g); // the backend's read-backs get the deadline and the figures
    return g;
}

extern "C" void gpu_grad_comm_set_wire_bf16(gpu_grad_comm *g)
{
    if (g->wire || !g->n)
        return;
    CUDA_CHECK(cudaMalloc((void **)&g->wire, g->n * sizeof *g->wire));
    if (talks(g->c))
        g->stats.blocking_s = blocking_time(g->c, g->wire, g->n, ncclBfloat16);
}

extern "C" void gpu_grad_comm_arm(gpu_grad_comm *g, int armed, long step)
{
    int was = g->armed;
    g->armed = armed && talks(g->c);
    g->c->step = step;
    if (g->armed && !was) {
        bucket_reset(&g->plan);
        g->pass_buckets = 0;
    }
}

// Enqueues the all-reduce of [start, start + count) on the comm stream, after the kernels queued so far
// on the compute stream (one event covers every ready range of the bucket: stream order).
static void launch(gpu_grad_comm *g, size_t start, size_t count)
{
    gpu_comm *c = g->c;
    CUDA_CHECK(cudaEventRecord(g->ready, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, g->ready, 0));
    if (!g->wire) {
        NCCL_ENQUEUE(c,
                     ncclAllReduce(g->grads + start, g->grads + start, count, ncclFloat, ncclSum, c->comm, c->stream),
                     "gradient all-reduce");
    } else { // narrowed, reduced and widened on the comm stream, in its order
        narrow_bf16<<<wire_blocks(count), WIRE_THREADS, 0, c->stream>>>(count, g->grads + start, g->wire + start);
        CUDA_CHECK(cudaGetLastError());
        NCCL_ENQUEUE(c,
                     ncclAllReduce(g->wire + start, g->wire + start, count, ncclBfloat16, ncclSum, c->comm, c->stream),
                     "gradient all-reduce");
        widen_bf16<<<wire_blocks(count), WIRE_THREADS, 0, c->stream>>>(count, g->wire + start, g->grads + start);
        CUDA_CHECK(cudaGetLastError());
    }
    g->pass_buckets++;
    g->stats.launched++;
}

extern "C" void gpu_grad_comm_ready(void *ctx, size_t offset, size_t count)
{
    gpu_grad_comm *g = (gpu_grad_comm *)ctx;
    if (!g->armed)
        return;
    if (offset > g->n || count > g->n - offset)
        die(EX_SOFTWARE, "gradient range [%zu, %zu) reported ready lies outside the %zu gradients", offset,
            offset + count, g->n);
    size_t start[2], counts[2];
    int k = bucket_ready(&g->plan, offset, count, start, counts);
    for (int i = 0; i < k; i++)
        launch(g, start[i], counts[i]);
}

// The deadline of the next wait: the start-up one until the first all-reduce, eager or replayed.
static void update_deadline(gpu_grad_comm *g)
{
    gpu_comm *c = g->c;
    c->timeout_s = comm_wait_deadline(c->startup_s, c->step_timeout_s, g->stats.reductions + g->replays, &c->option);
}

// finish() inside a capture: the same order with untimed events (one recorded in a capture is an edge of
// the graph, never recorded on the stream: the timing ring could not read it) and no host wait.
static void finish_captured(gpu_grad_comm *g)
{
    gpu_comm *c = g->c;
    CUDA_CHECK(cudaEventRecord(g->ready, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, g->ready, 0));
    size_t start, count;
    if (bucket_flush(&g->plan, &start, &count))
        launch(g, start, count);
    CUDA_CHECK(cudaEventRecord(g->joined, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->compute, g->joined, 0));
    g->graph_buckets = g->pass_buckets;
    g->stats.launched -= g->pass_buckets; // they run (and count) at each replay
    g->pass_buckets = 0;
    g->armed = 0;
}

extern "C" void gpu_grad_comm_replayed(gpu_grad_comm *g, long step)
{
    if (!g->graph_buckets)
        return; /* one rank: nothing communicates */
    gpu_comm *c = g->c;
    c->step = step;
    int slot = (int)(g->replays % TIMING_SLOTS);
    if (g->replays - g->replays_settled == TIMING_SLOTS) { // the host is a whole ring ahead
        WAIT_EVENT(c, g->replay_end[slot], "gradient all-reduce");
        g->replays_settled++;
    }
    CUDA_CHECK(cudaEventRecord(g->replay_end[slot], c->compute));
    g->replays++;
    g->stats.launched += g->graph_buckets;
    g->stats.buckets = g->graph_buckets;
    update_deadline(g);
}

extern "C" void gpu_grad_comm_finish(gpu_grad_comm *g)
{
    if (!g->armed)
        return;
    gpu_comm *c = g->c;
    if (gpu_capturing())
        return finish_captured(g);
    int slot = (int)(g->posted % TIMING_SLOTS);
    if (g->posted - g->timed == TIMING_SLOTS) { // the host is a whole ring ahead: wait for the oldest step
        WAIT_EVENT(c, g->done[slot], "gradient all-reduce");
        add_exposed(g, g->timed + 1);
    }
    // End of backward on the device timeline; the comm stream waits on it, so 'done' below is never
    // earlier than 'bwd_end' (exposed time >= 0; a completed 'done' implies a completed 'bwd_end', which
    // the ring's wait above relies on) and the remainder is ordered after the last kernels.
    CUDA_CHECK(cudaEventRecord(g->bwd_end[slot], c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, g->bwd_end[slot], 0));
    size_t start, count;
    if (bucket_flush(&g->plan, &start, &count))
        launch(g, start, count);
    CUDA_CHECK(cudaEventRecord(g->done[slot], c->stream));
    // The optimizer waits on the last bucket, on the device: the host goes on queueing the next step.
    CUDA_CHECK(cudaStreamWaitEvent(c->compute, g->done[slot], 0));
    g->posted++;
    g->stats.buckets = g->pass_buckets;
    g->stats.reductions++;
    update_deadline(g);
    g->pass_buckets = 0;
    g->armed = 0;
}

extern "C" void gpu_grad_comm_settle(gpu_grad_comm *g) { settle(g); }

extern "C" comm_stats gpu_grad_comm_get_stats(const gpu_grad_comm *g) { return g->stats; }

extern "C" void gpu_grad_comm_free(gpu_grad_comm *g)
{
    if (!g)
        return;
    gpu_set_compute_wait(nullptr, nullptr);
    // Nothing may still read the gradients or the events: wait for the comm stream (deadline).
    CUDA_CHECK(cudaEventRecord(g->ready, g->c->stream));
    WAIT_EVENT(g->c, g->ready, "gradient all-reduce");
    if (g->replays) { // a replay's all-reduce runs in the graph, ordered on the compute stream
        CUDA_CHECK(cudaEventRecord(g->settled, g->c->compute));
        WAIT_EVENT(g->c, g->settled, "gradient all-reduce");
    }
    if (g->wire)
        CUDA_CHECK(cudaFree(g->wire));
    CUDA_CHECK(cudaEventDestroy(g->ready));
    CUDA_CHECK(cudaEventDestroy(g->settled));
    CUDA_CHECK(cudaEventDestroy(g->joined));
    for (int i = 0; i < TIMING_SLOTS; i++) {
        CUDA_CHECK(cudaEventDestroy(g->bwd_end[i]));
        CUDA_CHECK(cudaEventDestroy(g->done[i]));
        CUDA_CHECK(cudaEventDestroy(g->replay_end[i]));
    }
    free(g);
}
