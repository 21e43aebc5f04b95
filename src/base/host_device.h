/* HD marks functions compiled for both host and device: the CPU path calls them in loops,
 * the CUDA kernels in grid-stride loops, so CPU tests exercise the GPU math. */
#ifndef MNIST_HOST_DEVICE_H
#define MNIST_HOST_DEVICE_H
#ifdef __CUDACC__
#define HD __host__ __device__
#else
#define HD
#endif
/* Unroll the next loop fully in device code (its arrays stay in registers); the host's compiler decides. */
#ifdef __CUDA_ARCH__
#define HD_UNROLL _Pragma("unroll")
#else
#define HD_UNROLL
#endif
#endif
