// conv2's pool with dropout1 both ways (MNIST_DDP_POOL=fused; backend.h's pool_flatten_dropout_forward and
// dropout_pool_backward_sum): the CUDA backend's kernels over kernels.h's kern_pool_flatten_dropout and
// kern_lane_pool_grad.
#ifndef MNIST_CUDA_POOL_FUSED_H
#define MNIST_CUDA_POOL_FUSED_H
#include <cstdint>

void cu_pool_flatten_dropout_forward(const float *x, const float *b, float *y, int32_t *arg, float *f, float *mask,
                                     int C, int N, int H, int W, int ld, const uint64_t *ids, uint64_t key, int layer,
                                     float p);
// dropout_pool_backward_sum, channel c's slices' partial sums in part[c * slices + s] (scratch). Returns 1, or
// 0 having done nothing (a channel's pooled outputs pass 32 bits, or the scratch holds too few partials).
int cu_dropout_pool_grad(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx, float *db,
                         int C, int N, int H, int W, int ld, double *part);
#endif
