// Kernels of the gradient exchange (comm_kernels.h).
#include "config.h"

#include "base/bf16.h"
#include "gpu/cuda/comm_kernels.h"
#include "gpu/cuda/cuda_check.h"
#include "gpu/cuda/globaltimer.h"
#include "gpu/cuda/grid.h"

enum {
    WIRE_THREADS = 256,
    // NCCL's ring all-reduce runs one block per channel; 16 is typical of an NVLink node (NCCL_MIN_NCHANNELS).
    PROXY_BLOCKS = 16,
    PROXY_THREADS = 512,
};

__global__ static void k_narrow_bf16(size_t n, const float *in, uint16_t *out)
{
    GRID_STRIDE(i, n) out[i] = bf16_from_float(in[i]);
}

__global__ static void k_widen_bf16(size_t n, const uint16_t *in, float *out)
{
    GRID_STRIDE(i, n) out[i] = float_from_bf16(in[i]);
}

void wire_narrow(cudaStream_t s, size_t n, const float *in, uint16_t *out)
{
    k_narrow_bf16<<<grid_blocks(n, WIRE_THREADS, 4096), WIRE_THREADS, 0, s>>>(n, in, out);
    CUDA_CHECK(cudaGetLastError());
}

void wire_widen(cudaStream_t s, size_t n, const uint16_t *in, float *out)
{
    k_widen_bf16<<<grid_blocks(n, WIRE_THREADS, 4096), WIRE_THREADS, 0, s>>>(n, in, out);
    CUDA_CHECK(cudaGetLastError());
}

__global__ static void k_stamp_backward_end(step_stamps *d) { d->backward_end_ns = globaltimer_ns(); }

__global__ static void k_stamp_exchange_end(step_stamps *d)
{
    unsigned long long now = globaltimer_ns();
    d->exposed_ns += now > d->backward_end_ns ? now - d->backward_end_ns : 0;
    d->steps++;
}

void stamp_backward_end(cudaStream_t s, step_stamps *d)
{
    k_stamp_backward_end<<<1, 1, 0, s>>>(d);
    CUDA_CHECK(cudaGetLastError());
}

void stamp_exchange_end(cudaStream_t s, step_stamps *d)
{
    k_stamp_exchange_end<<<1, 1, 0, s>>>(d);
    CUDA_CHECK(cudaGetLastError());
}

__global__ static void k_comm_proxy(const float *in, size_t n, size_t moved, float *sink, unsigned long long ns)
{
    __shared__ unsigned long long start;
    if (threadIdx.x == 0)
        start = globaltimer_ns();
    __syncthreads();
    GRID_STRIDE(i, moved) sink[i % n] = in[i % n];
    if (threadIdx.x == 0)
        while (globaltimer_ns() - start < ns)
            __nanosleep(500);
}

void comm_proxy(cudaStream_t s, const float *in, size_t n, size_t moved, float *sink, unsigned long long ns)
{
    if (!n)
        return;
    k_comm_proxy<<<PROXY_BLOCKS, PROXY_THREADS, 0, s>>>(in, n, moved, sink, ns);
    CUDA_CHECK(cudaGetLastError());
}
