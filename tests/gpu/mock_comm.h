/* The tests' NCCL communicator in the simulation: probe the GPU of a local rank, bind it, make a unique ID and
 * initialise a communicator of nranks as rank 0 (the simulated NCCL needs no peer). */
#ifndef MNIST_MOCK_COMM_H
#define MNIST_MOCK_COMM_H
#include "../check_run.h"

#include "gpu/gpu.h"

static inline gpu_comm *mock_comm_start(int local_rank, int nranks, double timeout_s)
{
    gpu_info info;
    char why[GPU_MSG_LEN];
    ck_assert_msg(gpu_probe(local_rank, &info, why, sizeof why) == 0, "gpu_probe: %s", why);
    gpu_bind(&info);
    unsigned char id[GPU_NCCL_ID_BYTES];
    gpu_nccl_unique_id(id);
    return gpu_comm_init(id, nranks, 0, timeout_s);
}
#endif
