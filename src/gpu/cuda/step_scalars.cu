// The step's scalars on the device (step_scalars.h). One struct for the process, rewritten before each step: a
// graph captured once replays for the whole run, whatever StepLR and the epoch's dropout key do.
#include "config.h"

#include "gpu/cuda/launch.h"
#include "gpu/cuda/step_scalars.h"
extern "C" {
#include "base/errors.h"
}

static kern_scalars *dev;  // what the kernels read
static kern_scalars bound; // what the host last wrote there
static int is_bound;

void cu_scalars_alloc(void)
{
    if (!dev)
        CUDA_CHECK(cudaMalloc(&dev, sizeof *dev));
}

// One thread writes the pair. The values travel as the launch's arguments: nothing on the host outlives the call,
// and the launch never waits for the stream, where a copy from pageable memory may. In stream order it lands
// after the previous step's kernels read the struct and before this step's do.
__global__ void k_set_step_scalars(kern_scalars *s, float lr, uint64_t key) { *s = kern_scalars{key, lr}; }

// Counted among the step's kernels (one launch more than the graph's nodes), like --profile's hold.
void cu_step_scalars(float lr, uint64_t key)
{
    cu_scalars_alloc();
    bound = kern_scalars{key, lr};
    is_bound = 1;
    LAUNCH_SHAPE(k_set_step_scalars, 1, 1, dev, lr, key);
}

const kern_scalars *cu_scalars_lr(float lr)
{
    if (!is_bound)
        return nullptr;
    if (lr != bound.lr)
        die(EX_SOFTWARE, "CUDA backend: an optimizer step with lr %.9g where %.9g was bound (step_scalars)", (double)lr,
            (double)bound.lr);
    return dev;
}

const kern_scalars *cu_scalars_key(uint64_t key)
{
    if (!is_bound)
        return nullptr;
    if (key != bound.key)
        die(EX_SOFTWARE, "CUDA backend: a dropout with key %016llx where %016llx was bound (step_scalars)",
            (unsigned long long)key, (unsigned long long)bound.key);
    return dev;
}
