#include "nn/cpu/wino43_pool.h"

#include "nn/cpu/nchw16c.h"
#include "nn/cpu/wino43.h"
#include "base/threads.h"

size_t wino43_pool_scratch_size(int C, int H, int W, int F)
{
    return (size_t)F * (H - 2) * (W - 2) + 2 * (size_t)C * H * W; /* output (or its gradient), input, its gradient */
}

static int part_first(const wino43_batch *b, int t) { return wino43_part_first(b->N, b->parts, t); }

void wino43_pool_forward(const wino43_batch *b, const float *x, const float *w, const float *pb, float *py,
                         int32_t *arg)
{
    wino43_weights(w, b->F, b->C, b->U);
    int oh = b->H - 2, ow = b->W - 2;
    PARALLEL_FOR
    for (int t = 0; t < b->parts; t++) {
        float *ys = b->scratch + t * wino43_pool_scratch_size(b->C, b->H, b->W, b->F),
              *xs = ys + (size_t)b->F * oh * ow;
        for (int n = part_first(b, t); n < part_first(b, t + 1); n++) {
            nchw16c_blocks_sample(x, xs, b->C, b->N, n, b->H * b->W);
            wino43_forward_sample(xs, b->U, NULL, ys, b->C, b->H, b->W, b->F);
            nchw16c_maxpool2_relu_forward_sample(ys, pb, py, arg, b->F, b->N, n, oh, ow, b->ld);
        }
    }
}

/* Per sample: the pool's gradient to the part's scratch, the weight gradient's sums, the input gradient, through
 * x_relu's ReLU to dx. */
void wino43_pool_backward(const wino43_batch *b, const float *dpy, const float *py, const int32_t *arg, const float *x,
                          const float *x_relu, const float *w, float *dw_sum, float *db_sum, float *dx)
{
    wino43_weights_backward(w, b->F, b->C, b->Ub);
    size_t part = wino43_wgrad_part_size(b->C, b->F), xn = (size_t)b->C * b->H * b->W;
    int oh = b->H - 2, ow = b->W - 2;
    PARALLEL_FOR
    for (int t = 0; t < b->parts; t++) {
        float *dys = b->scratch + t * wino43_pool_scratch_size(b->C, b->H, b->W, b->F);
        float *xs = dys + (size_t)b->F * oh * ow, *dxs = xs + xn;
        wino43_wgrad_start(b->ws + t * part, b->C, b->F);
        for (int n = part_first(b, t); n < part_first(b, t + 1); n++) {
            nchw16c_relu_maxpool2_backward_sample(dpy, py, arg, dys, b->F, b->N, n, oh, ow, b->ld);
            nchw16c_blocks_sample(x, xs, b->C, b->N, n, b->H * b->W);
            wino43_wgrad_sample(xs, dys, b->ws + t * part, b->C, b->H, b->W, b->F);
            wino43_backward_data_sample(dys, b->Ub, dxs, b->C, b->H, b->W, b->F);
            nchw16c_relu_backward_sample(dxs, x_relu, dx, b->C, b->N, n, b->H * b->W);
        }
    }
    wino43_wgrad_finish(b->ws, b->parts, dw_sum, db_sum, b->C, b->F);
}
