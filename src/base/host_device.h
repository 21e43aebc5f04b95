/* HD marks functions compiled for both host and device: the CPU path calls them in loops,
 * the CUDA kernels in grid-stride loops, so CPU tests exercise the GPU math. */
#ifndef MNIST_HOST_DEVICE_H
#define MNIST_HOST_DEVICE_H
#ifdef __CUDACC__
#define HD __host__ __device__
#else
#define HD
#endif
#endif
