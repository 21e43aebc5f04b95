// The device side of --profile's stamp clock (profile_clock.cu), a struct C can read too: the simulated runtime
// (tests/gpu/gpu_mock_steps.c) recognises k_phase_stamp by name and computes it on this struct.
#ifndef MNIST_CUDA_PROFILE_STAMPS_H
#define MNIST_CUDA_PROFILE_STAMPS_H
#include "base/profile.h"

// ns[p]: the nanoseconds charged to phase p so far; last_ns: the previous stamp's %globaltimer. A stamp of phase
// p adds the time since the previous stamp to ns[p], one of phase -1 (a mark) to nothing.
typedef struct phase_stamps {
    unsigned long long last_ns;
    unsigned long long ns[PROFILE_MAX_PHASES];
} phase_stamps;
#endif
