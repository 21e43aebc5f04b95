// conv2's max-pool, bias and ReLU with dropout1's flatten and dropout in one pass, and its backward with conv2's
// bias gradient in one reduction (MNIST_DDP_POOL=fused). That is one kernel each way instead of two and four,
// and the bias gradient from the pooled gradient instead of the 4x larger unpooled one. Same float operations as
// the composition (check_fused holds them to the CPU bit for bit).
#include "config.h"

#include "gpu/cuda/block_sum.h"
#include "gpu/cuda/launch.h"
#include "gpu/cuda/pool_fused.h"
#include "gpu/cuda/step_scalars.h"

__global__ void k_pool_flatten_dropout(size_t n, const float *x, const float *b, float *y, int32_t *arg, float *f,
                                       float *mask, int C, int N, int H, int W, int ld, const uint64_t *ids,
                                       uint64_t key, int layer, float p, const kern_scalars *s)
{
    key = kern_key(s, key);
    GRID_STRIDE(j, n) kern_pool_flatten_dropout(j, x, b, y, arg, f, mask, C, N, H, W, ld, ids, key, layer, p);
}

// The pool's backward and the slices' partials of the bias gradient, then its second pass in the last block done.
__device__ static unsigned pool_grad_done;

__global__ void k_dropout_pool_grad(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx,
                                    size_t count, int C, int N, int H, int W, int ld, double *part, float *db)
{
    size_t lo, hi, slot = slice_of(count, &lo, &hi);
    double s = block_sum(kern_lane_pool_grad(blockIdx.x, dy, mask, y, arg, dx, lo, hi, C, N, H, W, ld, threadIdx.x));
    if (threadIdx.x == 0)
        part[slot] = s;
    if (last_block_done(&pool_grad_done))
        for (unsigned c = threadIdx.x; c < gridDim.x; c += blockDim.x)
            kern_sum_finish(c, part, (int)gridDim.y, db);
}

void cu_pool_flatten_dropout_forward(const float *x, const float *b, float *y, int32_t *arg, float *f, float *mask,
                                     int C, int N, int H, int W, int ld, const uint64_t *ids, uint64_t key, int layer,
                                     float p)
{
    LAUNCH(k_pool_flatten_dropout, (size_t)C * N * (H / 2) * (W / 2), x, b, y, arg, f, mask, C, N, H, W, ld, ids, key,
           layer, p, mask ? cu_scalars_key(key) : nullptr);
}

int cu_dropout_pool_grad(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx, float *db,
                         int C, int N, int H, int W, int ld, double *part)
{
    size_t count = (size_t)N * (size_t)(H / 2) * (size_t)(W / 2);
    int slices = kern_red_slices(C, count);
    if (!count || count > UINT32_MAX || kern_red_group(C, slices) < C)
        return 0;
    LAUNCH_GRID(k_dropout_pool_grad, C, slices, dy, mask, y, arg, dx, count, C, N, H, W, ld, part, db);
    return 1;
}
