// Grid-stride loops, shared by the CUDA files that launch elementwise kernels (nn_cuda.cu, comm_kernels.cu).
#ifndef MNIST_CUDA_GRID_H
#define MNIST_CUDA_GRID_H
#include <cstddef>

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Blocks of 'threads' covering n elements, at most 'cap' (the loop covers the rest), at least one.
static inline unsigned grid_blocks(size_t n, unsigned threads, unsigned cap)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b < cap ? b : cap);
}
#endif
