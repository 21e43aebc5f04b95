// Launching kernels (the layers', the profile's hold): on the compute stream, each counted for the
// backend's per-step figures (gpu_count_kernel) and checked at once.
#ifndef MNIST_CUDA_LAUNCH_H
#define MNIST_CUDA_LAUNCH_H
#include "gpu/cuda/cuda_check.h"
#include "gpu/cuda/grid.h"
#include "gpu/gpu.h"
extern "C" {
#include "gpu/kernels.h"
}

enum { THREADS = KERN_LANES }; // a power of two: block_sum halves it

static inline cudaStream_t stream(void) { return (cudaStream_t)gpu_compute_stream(); }

static inline unsigned grid(size_t n) { return grid_blocks(n, THREADS, 65536); }

// One thread per element, kernels taking the element count first.
#define LAUNCH(kernel, n, ...)                                           \
    do {                                                                 \
        size_t n_ = (n);                                                 \
        if (n_) {                                                        \
            kernel<<<grid(n_), THREADS, 0, stream()>>>(n_, __VA_ARGS__); \
            gpu_count_kernel();                                          \
            CUDA_CHECK(cudaGetLastError());                              \
        }                                                                \
    } while (0)

// A per-channel reduction's 2-D grid: channels x slices blocks (kernels.h).
#define LAUNCH_GRID(kernel, channels, slices, ...)                                                     \
    do {                                                                                               \
        kernel<<<dim3((unsigned)(channels), (unsigned)(slices)), THREADS, 0, stream()>>>(__VA_ARGS__); \
        gpu_count_kernel();                                                                            \
        CUDA_CHECK(cudaGetLastError());                                                                \
    } while (0)

// A fixed number of blocks.
#define LAUNCH_BLOCKS(kernel, blocks, ...)                                     \
    do {                                                                       \
        if ((blocks) > 0) {                                                    \
            kernel<<<(unsigned)(blocks), THREADS, 0, stream()>>>(__VA_ARGS__); \
            gpu_count_kernel();                                                \
            CUDA_CHECK(cudaGetLastError());                                    \
        }                                                                      \
    } while (0)

// A grid of `blocks` (dim3) of `threads` each.
#define LAUNCH_SHAPE(kernel, blocks, threads, ...)                           \
    do {                                                                     \
        kernel<<<(blocks), (unsigned)(threads), 0, stream()>>>(__VA_ARGS__); \
        gpu_count_kernel();                                                  \
        CUDA_CHECK(cudaGetLastError());                                      \
    } while (0)

#endif
