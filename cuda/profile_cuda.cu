// --profile on the GPU: profile.h's stopwatch as CUDA events on the compute stream (profile_clock.h). Each
// lap or mark records the next event of a ring; the device time between two consecutive events goes to the
// later one's phase (a mark's to none), so the phases cover the compute stream's timeline, its idle gaps
// included (a step the host cannot feed fast enough shows as time in the phase that waited). Events are
// read only when the host has waited for the compute stream anyway (gpu_wait_compute: the loss read-back of
// each log interval, a download), so profiling adds no host wait, but one when the ring fills (more than
// RING laps in a log interval) and the flush at the end. The trainer profiles eager steps only (main.c turns
// CUDA graphs off: a graph's kernels cannot be timed per phase).
#include "config.h"

#include <utility>

#include "cuda_check.h"
#include "gpu/gpu.h"
#include "base/profile_clock.h"

enum { RING = 4096 }; // ~20 laps per step: 200 steps between two read-backs

static cudaEvent_t ring[RING];
static int phase_of[RING]; // the phase event i's time goes to, -1: a mark's
static int queued;         // events recorded since the last read-back; ring[0] is the read-back's last
static int created;

static void record(int phase)
{
    if (queued == RING)
        gpu_wait_compute(); // reads the ring back, keeping its last event
    CUDA_CHECK(cudaEventRecord(ring[queued], (cudaStream_t)gpu_compute_stream()));
    phase_of[queued++] = phase;
}

static void lap(int phase) { record(phase); }
static void mark(void) { record(-1); }

extern "C" void gpu_profile_settled(void)
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

static const profile_clock cuda_clock = {
    .lap = lap, .mark = mark, .flush = gpu_wait_compute,
    .about = "GPU time from CUDA events on the compute stream, eager steps (--profile turns CUDA graphs off)",
    .name = "cuda-events",
};

extern "C" const profile_clock *gpu_profile_clock(void)
{
    if (!created) { // before the first step: no step creates anything
        for (int i = 0; i < RING; i++)
            CUDA_CHECK(cudaEventCreate(&ring[i]));
        created = 1;
    }
    return &cuda_clock;
}

extern "C" void gpu_profile_release(void)
{
    for (int i = 0; created && i < RING; i++)
        CUDA_CHECK(cudaEventDestroy(ring[i]));
    created = queued = 0;
}
