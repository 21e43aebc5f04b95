// Kernels of the gradient exchange (nccl_comm.cu), each queued on the stream it is given: the bf16 wire
// format, the stamps that time replayed steps, and the communication proxy. Names matter: the simulated
// runtime (tests/gpu/gpu_mock_steps.c) recognises these kernels by name and computes them; it includes this
// header from C for step_stamps.
#ifndef MNIST_CUDA_COMM_KERNELS_H
#define MNIST_CUDA_COMM_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

// --grad-comm bf16: n gradients narrowed to bfloat16 (base/bf16.h, as the CPU path rounds) and widened back.
void wire_narrow(cudaStream_t s, size_t n, const float *in, uint16_t *out);
void wire_widen(cudaStream_t s, size_t n, const uint16_t *in, float *out);

// A replayed step's exposed all-reduce time, kept on the device. Events captured in a graph are edges, not
// timestamps, so the graph stamps %globaltimer itself. stamp_backward_end (compute stream, at the end of
// backward) writes backward_end_ns; stamp_exchange_end (communication stream, after the last bucket) adds
// the time since then to exposed_ns and counts the step. The host reads both at its one wait per interval.
typedef struct step_stamps {
    unsigned long long backward_end_ns, exposed_ns, steps;
} step_stamps;
void stamp_backward_end(cudaStream_t s, step_stamps *d);
void stamp_exchange_end(cudaStream_t s, step_stamps *d);

// The communication proxy (MNIST_DDP_COMM_PROXY): the SMs and memory traffic, and the time, of a peer exchange.
// It copies 'moved' floats, cycling over the n at 'in', into 'sink' (n floats) with as many blocks as NCCL's ring
// uses channels. Then it holds them until 'ns' nanoseconds have passed since the kernel started.
void comm_proxy(cudaStream_t s, const float *in, size_t n, size_t moved, float *sink, unsigned long long ns);
#endif
