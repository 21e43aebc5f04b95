// The bucketed gradient all-reduce on device buffers (src/gpu/gpu.h; mirrors src/comm/comm_mpi.c). Buckets are
// posted on the communication stream as backward makes them final, and captured into the step's graph. The
// optimizer is ordered after the last on the device; the host waits only at settle (once per log interval).
#include "config.h"

#include <cstdlib>

#include "gpu/cuda/comm_kernels.h"
#include "gpu/cuda/nccl_private.h"

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
    // The replays' exposed time (comm_kernels.h), on the device and its pinned copy read at settle; what of it
    // the figures hold already.
    step_stamps *stamps, *stamps_host;
    unsigned long long stamped_ns, stamped_steps;
    comm_stats stats;
};

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
// everything the trainer queued. Then the steps' exposed times can be read.
static void settle(void *ctx)
{
    gpu_grad_comm *g = (gpu_grad_comm *)ctx;
    if (g->graph_buckets) // the replays' stamps, copied in the same wait
        CUDA_CHECK(
            cudaMemcpyAsync(g->stamps_host, g->stamps, sizeof *g->stamps, cudaMemcpyDeviceToHost, g->c->compute));
    CUDA_CHECK(cudaEventRecord(g->settled, g->c->compute));
    WAIT_EVENT(g->c, g->settled, "gradient all-reduce");
    add_exposed(g, g->posted);
    g->replays_settled = g->replays;
    if (g->graph_buckets) {
        g->stats.exposed_s += 1e-9 * (double)(g->stamps_host->exposed_ns - g->stamped_ns);
        g->stats.reductions += (long)(g->stamps_host->steps - g->stamped_steps);
        g->stamped_ns = g->stamps_host->exposed_ns;
        g->stamped_steps = g->stamps_host->steps;
    }
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
        proxy_reserve(c, n);
        // A scratch copy: the gradients may hold anything now.
        float *scratch = nullptr;
        CUDA_CHECK(cudaMalloc((void **)&scratch, n * sizeof(float)));
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, n * sizeof(float), c->compute));
        g->stats.blocking_s = blocking_time(c, scratch, n, ncclFloat);
        CUDA_CHECK(cudaFree(scratch)); // the timed operations were waited for
        CUDA_CHECK(cudaMalloc((void **)&g->stamps, sizeof *g->stamps));
        CUDA_CHECK(cudaMallocHost((void **)&g->stamps_host, sizeof *g->stamps_host));
        CUDA_CHECK(cudaMemsetAsync(g->stamps, 0, sizeof *g->stamps, c->compute));
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
        wire_narrow(c->stream, count, g->grads + start, g->wire + start);
        NCCL_ENQUEUE(c,
                     ncclAllReduce(g->wire + start, g->wire + start, count, ncclBfloat16, ncclSum, c->comm, c->stream),
                     "gradient all-reduce");
        wire_widen(c->stream, count, g->wire + start, g->grads + start);
    }
    proxy_after(c, g->grads + start, count, count * (g->wire ? 2 : sizeof(float)));
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

// finish() inside a capture: the same order with untimed events and no host wait. An event recorded in a capture
// is an edge of the graph, never recorded on the stream, so the timing ring could not read it. The graph times
// itself with two stamps (end of backward, end of the last bucket), read at settle.
static void finish_captured(gpu_grad_comm *g)
{
    gpu_comm *c = g->c;
    stamp_backward_end(c->compute, g->stamps);
    CUDA_CHECK(cudaEventRecord(g->ready, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, g->ready, 0));
    size_t start, count;
    if (bucket_flush(&g->plan, &start, &count))
        launch(g, start, count);
    stamp_exchange_end(c->stream, g->stamps);
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
    // End of backward on the device timeline; the comm stream waits on it. So 'done' below is never
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
    if (g->stamps) {
        CUDA_CHECK(cudaFree(g->stamps));
        CUDA_CHECK(cudaFreeHost(g->stamps_host));
    }
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
