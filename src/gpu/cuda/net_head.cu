// net's training head in one block (src/nn/head.h): the phases of kernels.h's kern_head, a barrier between
// them, instead of fifteen kernels and cuBLAS calls from fc1's bias to fc1's output and bias gradients. A
// batch's head is a few MFLOP (64 x 128 x 10 three times), so one block is enough and needs no grid-wide
// barrier. Its sums run in a fixed order (results identical run to run) and in fp32 whatever --precision
// says.
#include "config.h"

#include "gpu/cuda/launch.h"
#include "gpu/cuda/net_head.h"
#include "gpu/cuda/step_scalars.h"

enum { HEAD_THREADS = 1024 };

__global__ void __launch_bounds__(HEAD_THREADS) k_net_head(nn_head a, const kern_scalars *s)
{
    a.key = kern_key(s, a.key);
    for (int phase = 0; phase < KERN_HEAD_PHASES; phase++) {
        uint32_t n = kern_head_count(&a, phase);
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
            kern_head(phase, i, &a);
        __syncthreads(); // the next phase reads what this one wrote (global memory, one block)
    }
}

void cu_net_head(const nn_head *h)
{
    if (h->N == 0)
        return;
    k_net_head<<<1, HEAD_THREADS, 0, stream()>>>(*h, cu_scalars_key(h->key));
    gpu_count_kernel();
    CUDA_CHECK(cudaGetLastError());
}
