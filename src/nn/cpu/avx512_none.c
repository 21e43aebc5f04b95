/* wino43.h, wino43_pool.h and conv1_direct.h where the compiler cannot build their AVX-512 and AVX2 kernels (configure:
 * not x86-64): no CPU and no shape can take them, so conv_onednn.c never calls the rest, which stops the
 * program if it ever is. */
#include "nn/cpu/conv1_direct.h"
#include "nn/cpu/wino43.h"
#include "nn/cpu/wino43_pool.h"
#include "nn/cpu/wino43_stack.h"

#include "base/errors.h"

#define NOT_BUILT() die(EX_SOFTWARE, "%s: this build has no AVX-512 kernels", __func__)

int wino43_has_cpu(void) { return 0; }
const char *wino43_isa(void) { return "none"; }
int wino43_usable(int C, int F, int H, int W, int k, int pad)
{
    return (void)C, (void)F, (void)H, (void)W, (void)k, (void)pad, 0;
}
int wino43_backward_usable(int C, int F, int H, int W, int k, int pad) { return wino43_usable(C, F, H, W, k, pad); }
int conv1_direct_usable(int H, int W, int F, int k, int pad) { return wino43_usable(1, F, H, W, k, pad); }
int conv1_direct_blocks_usable(int H, int W, int F, int k, int pad) { return wino43_usable(1, F, H, W, k, pad); }
int wino43_stack_forward(const nn_conv_stack *s) { return (void)s, 0; }
int wino43_stack_backward(const nn_conv_stack *s) { return (void)s, 0; }
size_t wino43_weights_size(int C, int F) { return (void)C, (void)F, 0; }
size_t wino43_wgrad_part_size(int C, int F) { return (void)C, (void)F, 0; }
size_t wino43_pool_scratch_size(int C, int H, int W, int F) { return (void)C, (void)H, (void)W, (void)F, 0; }

void wino43_weights(const float *w, int F, int C, float *U) { (void)w, (void)F, (void)C, (void)U, NOT_BUILT(); }
void wino43_weights_backward(const float *w, int F, int C, float *U) { wino43_weights(w, F, C, U); }
void wino43_forward(const float *x, const float *U, const float *b, float *y, int N, int C, int H, int W, int F)
{
    (void)x, (void)U, (void)b, (void)y, (void)N, (void)C, (void)H, (void)W, (void)F, NOT_BUILT();
}
void wino43_backward_data(const float *dy, const float *U, float *dx, int N, int C, int H, int W, int F)
{
    wino43_forward(dy, U, NULL, dx, N, C, H, W, F);
}
void wino43_backward_weights(const float *x, const float *dy, float *dw, float *db, float *ws, int parts, int N, int C,
                             int H, int W, int F)
{
    (void)dy, (void)dw, (void)db, (void)ws, (void)parts;
    wino43_forward(x, NULL, NULL, NULL, N, C, H, W, F);
}
void wino43_pool_forward(const wino43_batch *b, const float *x, const float *w, const float *pb, float *py,
                         int32_t *arg)
{
    (void)b, (void)x, (void)w, (void)pb, (void)py, (void)arg, NOT_BUILT();
}
void wino43_pool_backward(const wino43_batch *b, const float *dpy, const float *py, const int32_t *arg, const float *x,
                          const float *x_relu, const float *w, float *dw_sum, float *db_sum, float *dx)
{
    (void)dpy, (void)py, (void)arg, (void)x_relu, (void)dw_sum, (void)db_sum, (void)dx;
    wino43_pool_forward(b, x, w, NULL, NULL, NULL);
}
int conv1_direct_bias_relu(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F, int k,
                           int pad)
{
    (void)x, (void)w, (void)b, (void)y, (void)N, (void)H, (void)W, (void)F, (void)k, (void)pad;
    return 0;
}
void conv1_direct_backward(const float *x, const float *dy, float *dw, float *db, int parts, int N, int H, int W, int F)
{
    (void)dy, (void)dw, (void)db, (void)parts;
    wino43_forward(x, NULL, NULL, NULL, N, 1, H, W, F);
}
