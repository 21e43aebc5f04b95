// The device side of --profile's stamp clock (profile_clock.cu), in C the host compiles too: the simulated runtime
// (tests/gpu/gpu_mock_steps.c) recognises k_phase_stamp by name and computes it with phase_stamp_add.
#ifndef MNIST_CUDA_PROFILE_STAMPS_H
#define MNIST_CUDA_PROFILE_STAMPS_H
#include "base/host_device.h"
#include "base/profile.h"

// ns[p]: the nanoseconds charged to phase p so far; last_ns: the previous stamp's time.
typedef struct phase_stamps {
    unsigned long long last_ns;
    unsigned long long ns[PROFILE_MAX_PHASES];
} phase_stamps;

// A stamp at time now: phase p (>= 0) gets the time since the previous stamp, a mark (-1) nothing. The first
// stamp after creation (last_ns 0) starts the timeline, like a mark.
static inline HD void phase_stamp_add(phase_stamps *d, int phase, unsigned long long now)
{
    if (phase >= 0 && d->last_ns)
        d->ns[phase] += now - d->last_ns;
    d->last_ns = now;
}
#endif
