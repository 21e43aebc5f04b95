// The block trees of the per-channel reductions (kernels.h's slices and lanes), shared by the CUDA files that
// launch them (layers.cu, pool_fused.cu).
#ifndef MNIST_CUDA_BLOCK_SUM_H
#define MNIST_CUDA_BLOCK_SUM_H
#include "launch.h"

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

// This block's slice of its channel (blockIdx.x; slice blockIdx.y of gridDim.y), and its partial's slot.
__device__ static inline size_t slice_of(size_t count, size_t *lo, size_t *hi)
{
    op_slice(count, (int)gridDim.y, (int)blockIdx.y, lo, hi);
    return (size_t)blockIdx.x * gridDim.y + blockIdx.y;
}
#endif
