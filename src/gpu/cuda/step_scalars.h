// The step's learning rate and dropout key in device memory (backend.h's step_scalars, kernels.h's
// kern_scalars): the host writes them on the compute stream before each step, and the kernels that take lr or
// key are handed their address, so a captured graph reads each step's values instead of freezing them.
#ifndef MNIST_CUDA_STEP_SCALARS_H
#define MNIST_CUDA_STEP_SCALARS_H
#include <cstdint>
extern "C" {
#include "gpu/kernels.h"
}

// The device struct (once, before any capture: nn_cuda).
void cu_scalars_alloc(void);
// backend.h's step_scalars: binds lr and key from now on, queued before the work that follows.
void cu_step_scalars(float lr, uint64_t key);
// What a kernel taking lr or key is given: NULL while nothing is bound (it uses its by-value argument), else the
// device struct, after checking that the by-value argument is the bound one (a replayed step could not see it).
const kern_scalars *cu_scalars_lr(float lr);
const kern_scalars *cu_scalars_key(uint64_t key);
#endif
