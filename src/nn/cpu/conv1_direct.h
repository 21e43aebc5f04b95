/* net's conv1 (one input channel, 3x3, no padding) as a direct convolution with AVX-512 or AVX2. It replaces
 * im2col and a K = 9 GEMM, too small for OpenBLAS to run well.
 * - 16 output pixels of a row per vector, the nine shifted input vectors in registers for four filters at a time;
 * - the forward with its bias and ReLU;
 * - the weight and bias gradients summed by parts of the batch (one per thread, added in part order). */
#ifndef MNIST_CONV1_DIRECT_H
#define MNIST_CONV1_DIRECT_H
#include <stddef.h>

/* Whether this CPU and shape can take it: AVX-512 or AVX2, a 3x3 kernel without padding, output rows of up to 32
 * pixels, F a multiple of 4. */
int conv1_direct_usable(int H, int W, int F, int k, int pad);
/* y [F][N][H-2][W-2] = relu(conv(x [1][N][H][W], w [F][1][3][3]) + b) where usable (backend.h's
 * conv1_bias_relu_forward), else 0 having done nothing. */
int conv1_direct_bias_relu(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F, int k,
                           int pad);
/* dw [F][1][3][3] and db [F] += the gradients from x and dy [F][N][H-2][W-2], in parts parts. */
void conv1_direct_backward(const float *x, const float *dy, float *dw, float *db, int parts, int N, int H, int W,
                           int F);

/* The same sums with sixteen filters per vector, one sample at a time, in the 16-channel blocks of nchw16c.h
 * (wino43_stack.h): whether this CPU and shape can take them (AVX-512 or AVX2, 3x3 without padding, F a
 * multiple of 16) ... */
int conv1_direct_blocks_usable(int H, int W, int F, int k, int pad);
/* ... h [F/16][H-2][W-2][16] = relu(conv(x [H][W], w) + b), conv1_direct_bias_relu's values bit for bit ... */
void conv1_direct_blocks_sample(const float *x, const float *w, const float *b, float *h, int H, int W, int F);
/* ... the floats of a part's sums of the gradients ... */
size_t conv1_direct_wgrad_part_size(int F);
/* ... a part's sums += one sample's: dh = dxb [F/16][H-2][W-2][16] through the ReLU whose output h is (blocked
 * alike) with x [H][W] ... */
void conv1_direct_wgrad_blocks_sample(const float *x, const float *dxb, const float *h, float *part, int H, int W,
                                      int F);
/* ... and dw [F][1][3][3], db [F] += the parts' sums, in part order. */
void conv1_direct_wgrad_blocks_finish(const float *sums, int parts, float *dw, float *db, int F);

/* The kernels of one ISA (conv1_direct_v16.h: AVX-512 and AVX2 give the same bits), per sample; the functions
 * above pick the one cpu_isa.h allows. forward_sample writes sample n of y, backward_sample adds sample n's
 * products to a part's sums [F][10][16 lanes]. */
typedef struct {
    void (*forward_sample)(const float *x, const float *w, const float *b, float *y, int N, int n, int H, int W, int F);
    void (*backward_sample)(const float *x, const float *dy, float *s, int N, int n, int H, int W, int F);
    void (*blocks_sample)(const float *x, const float *w, const float *b, float *h, int H, int W, int F);
    void (*wgrad_blocks_sample)(const float *x, const float *dxb, const float *h, float *part, int H, int W, int F);
} conv1_direct_kernels;
extern const conv1_direct_kernels conv1_direct_avx512, conv1_direct_avx2;
#endif
