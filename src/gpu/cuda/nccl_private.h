// The NCCL communicator's state and waits, shared by nccl_comm.cu (the communicator, its collectives) and
// nccl_grad.cu (the bucketed gradient all-reduce). Private to cuda/: src/gpu/gpu.h is the interface.
#ifndef MNIST_CUDA_NCCL_COMM_H
#define MNIST_CUDA_NCCL_COMM_H
#include "gpu/cuda/cuda_check.h"
#include "gpu/gpu.h"

struct gpu_comm {
    ncclComm_t comm;
    int rank, world, device;
    double timeout_s;                 // the bound of each wait now: startup_s, then comm_wait_deadline() after a step
    double startup_s, step_timeout_s; // --comm-timeout, --step-timeout
    const char *option;               // the option that set timeout_s, for messages
    long step;                        // the last armed step, for messages; -1 before the first
    int initialised;                  // ncclCommInitRankConfig completed (selects the hint of a timeout)
    int alone;                        // one rank communicates as with peers (gpu_comm_set_alone)
    cudaStream_t compute;             // the trainer's (not owned)
    cudaStream_t stream;              // communication stream (owned)
    cudaEvent_t ready, done;          // ordering (timing disabled)
    cudaEvent_t t0, t1;               // timing
    float *dev_scalar, *host_scalar;  // one float for max-over-ranks (host side pinned: no blocking copy)
    comm_proxy_spec proxy;            // the peers' traffic stood in for after each all-reduce (bus_gbps 0: none)
    float *sink;                      // where the proxy writes: sink_n floats
    size_t sink_n;
};

// Whether collectives run: with peers, or alone on request.
static inline int talks(const gpu_comm *c) { return c->world > 1 || c->alone; }

// After an NCCL call on the communicator: its result, then the communicator's state until it leaves
// ncclInProgress, with the deadline; abort and die on error or timeout.
void nccl_settle(gpu_comm *c, ncclResult_t r, const char *op, const char *file, int line);
#define NCCL_ENQUEUE(c, call, op) nccl_settle((c), (call), (op), __FILE__, __LINE__)
// Host wait for an event with the deadline, watching the communicator for asynchronous errors.
void wait_event(gpu_comm *c, cudaEvent_t ev, const char *op, const char *file, int line);
#define WAIT_EVENT(c, ev, op) wait_event((c), (ev), (op), __FILE__, __LINE__)

// Seconds per all-reduce (sum, in place) of n elements of type at dev, proxy included: the mean of iters
// after a warm-up, the maximum over ranks; 0 when the communicator does not talk.
double time_allreduce(gpu_comm *c, void *dev, size_t n, ncclDataType_t type, int iters);
// The communication proxy (gpu_comm_set_proxy): its sink sized for n floats (outside a capture); queued on the
// comm stream after an all-reduce of wire_bytes, reading the n_floats at data.
void proxy_reserve(gpu_comm *c, size_t n);
void proxy_after(gpu_comm *c, const float *data, size_t n_floats, size_t wire_bytes);
#endif
