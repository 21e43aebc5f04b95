/* conv2's forward and input gradient as Winograd F(4x4, 3x3) convolutions of the project's own, fused by
 * blocks of six tiles. The input tiles' transform, the 36 products over the channels and the output transform
 * with the bias run while the block is in L1, so the transformed tensors never reach memory (oneDNN 2.6's
 * jit_wino_4x3 writes and reads them back: docs/performance.md). Its weight gradient is F(3x3, 4x4), summed in
 * the transformed space. Blocked layouts of nchw16c.h in and out; AVX-512, or AVX2 (the same bits). Its
 * rounding is about oneDNN's Winograd's (wino43.c: the points). */
#ifndef MNIST_WINO43_H
#define MNIST_WINO43_H
#include <stddef.h>

/* Whether this CPU can run it (cpu_isa.h: AVX-512 or AVX2 with FMA), and with which ("AVX-512", "AVX2",
 * "none"). */
int wino43_has_cpu(void);
const char *wino43_isa(void);
/* Whether this CPU and shape can take it: AVX-512 or AVX2, a 3x3 kernel without padding, C a multiple of 16 up to 128,
 * F a multiple of 16 up to 128, an output whose sides are multiples of 4. */
int wino43_usable(int C, int F, int H, int W, int k, int pad);
/* Floats of the transformed weights U [36][C][F]. */
size_t wino43_weights_size(int C, int F);
/* U = G w G^T per filter and channel; w [F][C][3][3]. */
void wino43_weights(const float *w, int F, int C, float *U);
/* y [N][F/16][H-2][W-2][16] = conv(x [N][C/16][H][W][16], w) + b[f], U from wino43_weights. */
void wino43_forward(const float *x, const float *U, const float *b, float *y, int N, int C, int H, int W, int F);

/* The input gradient the same way (the correlation of dy padded by 2 with each kernel turned by 180 degrees,
 * partial tiles at the edges). First, whether the CPU and shape can take it (C up to 128, F up to 128)... */
int wino43_backward_usable(int C, int F, int H, int W, int k, int pad);
/* ... U [36][F][C] from w [F][C][3][3] ... */
void wino43_weights_backward(const float *w, int F, int C, float *U);
/* ... and dx [N][C/16][H][W][16] from dy [N][F/16][H-2][W-2][16]. */
void wino43_backward_data(const float *dy, const float *U, float *dx, int N, int C, int H, int W, int F);

/* The weight and bias gradients the same way (Winograd F(3x3, 4x4) over the same points) for the shapes
 * wino43_usable takes. The sums over the samples are split into parts (one per thread, added in part order: the
 * bits depend on the number of parts only). First, the floats of workspace per part ... */
size_t wino43_wgrad_part_size(int C, int F);
/* ... and dw [F][C][3][3], db [F] overwritten from x [N][C/16][H][W][16] and dy [N][F/16][H-2][W-2][16], with ws
 * parts x wino43_wgrad_part_size(C, F) floats. */
void wino43_backward_weights(const float *x, const float *dy, float *dw, float *db, float *ws, int parts, int N, int C,
                             int H, int W, int F);

/* The same by parts and samples, for loops that run a sample's layers while its blocks are in cache (the same
 * bits): part p takes samples wino43_part_first(N, parts, p) to wino43_part_first(N, parts, p + 1) - 1 ... */
static inline int wino43_part_first(int N, int parts, int p) { return (int)((long)N * p / parts); }
/* ... zeroes its part, adds each sample's gradients (x, dy: the sample's blocks) in turn ... */
void wino43_wgrad_start(float *part, int C, int F);
void wino43_wgrad_sample(const float *x, const float *dy, float *part, int C, int H, int W, int F);
/* ... and the parts' sums give dw and db. */
void wino43_wgrad_finish(float *ws, int parts, float *dw, float *db, int C, int F);
/* One sample's forward and input gradient (blocks of that sample alone). */
void wino43_forward_sample(const float *x, const float *U, const float *b, float *y, int C, int H, int W, int F);
void wino43_backward_data_sample(const float *dy, const float *U, float *dx, int C, int H, int W, int F);
#endif
