// net's training head as one kernel (src/nn/head.h; the CUDA backend's head_train, MNIST_DDP_HEAD=fused).
#ifndef MNIST_CUDA_NET_HEAD_H
#define MNIST_CUDA_NET_HEAD_H
extern "C" {
#include "nn/head.h"
}

void cu_net_head(const nn_head *h);
#endif
