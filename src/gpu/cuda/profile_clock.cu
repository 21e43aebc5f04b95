// --profile on the GPU: profile.h's stopwatch (profile_clock.h) on the compute stream, in one of two clocks.
// Each lap or mark notes a point of the stream's timeline; the device time between two consecutive points goes
// to the later one's phase (a mark's to none), so the phases cover the timeline, its idle gaps included. Each
// step starts with a hold (below): its work runs back to back, so a phase is the GPU's time for its kernels,
// not the host's launches. The times are read only when the host has waited for the compute stream anyway
// (gpu_wait_compute: the loss read-back of each log interval, a download).
// - Events (--cuda-graph off): a ring of CUDA events. A captured event is an edge, not a time, so eager only.
// - Stamps (--cuda-graph on): one-thread kernels writing %globaltimer, which a captured step keeps as nodes, so
//   replayed steps are timed too. Each stamp is one node more in the step.
#include "config.h"

#include <cstring>
#include <utility>

#include "base/profile_clock.h"
#include "gpu/cuda/globaltimer.h"
#include "gpu/cuda/launch.h"
#include "gpu/cuda/profile_stamps.h"

// The hold: one thread spins on the GPU's nanosecond timer while the host queues the step behind it. 1.5 ms is
// about three times the host's time to queue an eager step (docs/gpu.md).
enum { HOLD_NS = 1500000 };

__global__ void k_hold(unsigned long long ns)
{
    unsigned long long t0 = globaltimer_ns();
    while (globaltimer_ns() - t0 < ns)
        ;
}

static const profile_clock *active; // the clock in use, NULL: none yet

// Counted: one of the step's launches. The clock's mark then starts the step's timeline.
static void hold(void)
{
    LAUNCH_SHAPE(k_hold, 1, 1, (unsigned long long)HOLD_NS);
    active->mark();
}

// ---- Events: a ring, read back in order ----------------------------------------------------------

enum { RING = 4096 }; // ~20 laps per step: 200 steps between two read-backs

static cudaEvent_t ring[RING];
static int phase_of[RING]; // the phase event i's time goes to, -1: a mark's
static int queued;         // events recorded since the last read-back; ring[0] is the read-back's last
static int created;

// Adds no host wait but one when the ring fills (more than RING laps in a log interval).
static void record(int phase)
{
    if (queued == RING)
        gpu_wait_compute(); // reads the ring back, keeping its last event
    CUDA_CHECK(cudaEventRecord(ring[queued], stream()));
    phase_of[queued++] = phase;
}

static void event_lap(int phase) { record(phase); }
static void event_mark(void) { record(-1); }

static void events_settled(void)
{
    for (int i = 1; i < queued; i++) {
        if (phase_of[i] < 0)
            continue;
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ring[i - 1], ring[i]));
        profile_add(phase_of[i], 1e-3 * ms);
    }
    if (queued > 1) { // the last event starts the next interval
        std::swap(ring[0], ring[queued - 1]);
        queued = 1;
    }
}

static const profile_clock event_clock = {
    .lap = event_lap,
    .mark = event_mark,
    .flush = gpu_wait_compute,
    .hold = hold,
    .about = "GPU time from CUDA events on the compute stream, eager steps (--cuda-graph off), each held until "
             "queued and timed back to back (the holds are in no phase)",
    .name = "cuda-events",
};

// ---- Stamps: sums kept on the device, copied back in the host's waits ------------------------------

static phase_stamps *stamps, *stamps_host;                 // the device's sums, and their copy at the last wait
static unsigned long long stamps_read[PROFILE_MAX_PHASES]; // what profile_add has been given
static int stamps_copy_queued;

__global__ void k_phase_stamp(phase_stamps *d, int phase) { phase_stamp_add(d, phase, globaltimer_ns()); }

static void stamp_lap(int phase) { LAUNCH_SHAPE(k_phase_stamp, 1, 1, stamps, phase); }
static void stamp_mark(void) { stamp_lap(-1); }

static void stamps_settled(void)
{
    if (!stamps_copy_queued)
        return;
    stamps_copy_queued = 0;
    for (int p = 0; p < PROFILE_MAX_PHASES; p++) {
        unsigned long long ns = stamps_host->ns[p];
        if (ns != stamps_read[p])
            profile_add(p, 1e-9 * (double)(ns - stamps_read[p]));
        stamps_read[p] = ns;
    }
}

static const profile_clock stamp_clock = {
    .lap = stamp_lap,
    .mark = stamp_mark,
    .flush = gpu_wait_compute,
    .hold = hold,
    .about = "GPU time from %globaltimer stamps on the compute stream, replayed steps included (each stamp one "
             "node more), each step held until queued and timed back to back (the holds are in no phase)",
    .name = "graph-stamps",
};

// ---- Node cost: an empty kernel's share of a replayed graph ---------------------------------------

__global__ void k_empty(void) {}

extern "C" double gpu_node_cost_s(int nodes, int replays)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed));
    for (int i = 0; i < nodes; i++)
        k_empty<<<1, 1, 0, stream()>>>(); // not the trainer's: not counted
    CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    CUDA_CHECK(cudaGraphLaunch(exec, stream())); // the first replay uploads the graph: not timed
    CUDA_CHECK(cudaEventRecord(t0, stream()));
    for (int r = 0; r < replays; r++)
        CUDA_CHECK(cudaGraphLaunch(exec, stream()));
    CUDA_CHECK(cudaEventRecord(t1, stream()));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    return 1e-3 * (double)ms / ((double)nodes * (double)replays);
}

// ---- The clock in use ----------------------------------------------------------------------------

static void before_wait(void)
{
    if (active != &stamp_clock)
        return;
    CUDA_CHECK(cudaMemcpyAsync(stamps_host, stamps, sizeof *stamps, cudaMemcpyDeviceToHost, stream()));
    stamps_copy_queued = 1;
}

static void settled(void)
{
    if (active == &stamp_clock)
        stamps_settled();
    else if (active == &event_clock)
        events_settled();
}

// Before the first step: no step allocates or creates anything.
extern "C" const profile_clock *gpu_profile_clock(int graphs)
{
    if (active)
        return active;
    if (graphs) {
        CUDA_CHECK(cudaMalloc((void **)&stamps, sizeof *stamps));
        CUDA_CHECK(cudaMallocHost((void **)&stamps_host, sizeof *stamps_host));
        CUDA_CHECK(cudaMemsetAsync(stamps, 0, sizeof *stamps, stream()));
        memset(stamps_read, 0, sizeof stamps_read);
        active = &stamp_clock;
    } else {
        for (int i = 0; i < RING; i++)
            CUDA_CHECK(cudaEventCreate(&ring[i]));
        created = 1;
        active = &event_clock;
    }
    gpu_set_wait_hooks(before_wait, settled);
    return active;
}

extern "C" void gpu_profile_release(void)
{
    for (int i = 0; created && i < RING; i++)
        CUDA_CHECK(cudaEventDestroy(ring[i]));
    created = queued = 0;
    if (stamps) {
        CUDA_CHECK(cudaFree(stamps));
        CUDA_CHECK(cudaFreeHost(stamps_host));
    }
    stamps = stamps_host = nullptr;
    stamps_copy_queued = 0;
    active = nullptr;
    gpu_set_wait_hooks(nullptr, nullptr);
}
