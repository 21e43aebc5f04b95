// The block trees of the per-channel reductions (kernels.h's slices and lanes), shared by the CUDA files that
// launch them (nn_cuda.cu, pool_fused.cu).
#ifndef MNIST_CUDA_BLOCK_SUM_H
#define MNIST_CUDA_BLOCK_SUM_H
#include "gpu/cuda/launch.h"

// The sum of v over the block, returned to every thread (in double, like the CPU's reductions).
__device__ static inline double block_sum(double v)
{
    __shared__ double part[THREADS];
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    double total = part[0];
    __syncthreads(); // part is reused by the next call
    return total;
}

// Whether this block is the last of `blocks` counted on *count to be done, its partials written before (by
// thread 0; where other threads wrote some, each fenced them and the block synced before this call). Each block
// fences and takes a ticket from *count, and the one taking the last ticket resets it for the next launch (CUDA's
// fence-and-count reduction; kernels on one stream never overlap). The last block then runs the reduction's
// second pass, in the same fixed order as a kernel of its own would: one node, not two.
__device__ static inline int last_of(unsigned *count, unsigned blocks)
{
    __shared__ int last;
    if (threadIdx.x == 0) {
        __threadfence(); // the partial is visible everywhere before the ticket is
        last = atomicAdd(count, 1u) == blocks - 1;
        if (last)
            *count = 0;
    }
    __syncthreads();
    if (last)
        __threadfence(); // and read after it
    return last;
}

// last_of all the launch's blocks.
__device__ static inline int last_block_done(unsigned *count) { return last_of(count, gridDim.x * gridDim.y); }

// This block's slice of its channel (blockIdx.x; slice blockIdx.y of gridDim.y), and its partial's slot.
__device__ static inline size_t slice_of(size_t count, size_t *lo, size_t *hi)
{
    op_slice(count, (int)gridDim.y, (int)blockIdx.y, lo, hi);
    return (size_t)blockIdx.x * gridDim.y + blockIdx.y;
}
#endif
