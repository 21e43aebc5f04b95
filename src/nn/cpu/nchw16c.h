/* Kernels between oneDNN's blocked layout nChw16c ([N][C/16][H][W][16]: sixteen channels of one pixel side
 * by side, what its AVX-512 convolutions take and give) and the CNHW planes of layers.h. Each is fused with the
 * layer next to the convolution, so conv_onednn.c skips oneDNN's conversion of the whole tensor and the
 * extra pass over it. Same ops.h functions in the same order as the nn_cpu.h functions named: the same bits. */
#ifndef MNIST_NCHW16C_H
#define MNIST_NCHW16C_H
#include <stddef.h>
#include <stdint.h>

enum { CHANNEL_BLOCK = 16 }; /* channels per block; C a multiple of it */

/* x [N][C/16][H][W][16] -> y = relu(maxpool2(x) + b[c]) in planes [C][N][H/2][W/2] (b NULL: no bias), arg
 * the argmaxes as cpu_maxpool2_relu_forward gives them for x in CNHW planes with rows ld long. */
void nchw16c_maxpool2_relu_forward(const float *x, const float *b, float *y, int32_t *arg, int C, int N, int H, int W,
                                   int ld);
/* dx [N][C/16][H][W][16] = what cpu_relu_maxpool2_backward writes to CNHW planes, junk columns aside;
 * dy and y (planes [C][N][H/2][W/2]) are left as they are. */
void nchw16c_relu_maxpool2_backward(const float *dy, const float *y, const int32_t *arg, float *dx, int C, int N, int H,
                                    int W, int ld);
/* dx [C][N][HW] = cpu_relu_backward of dxb [N][C/16][HW][16] in CNHW, through the ReLU whose output is y
 * [C][N][HW]. */
void nchw16c_relu_backward(const float *dxb, const float *y, float *dx, int C, int N, int HW);

/* Sample n's part of each, its blocked tensor alone (xs, dxs: [C/16][H][W][16], a sample's scratch), for loops
 * that keep a sample's blocks in cache from the convolution to the conversion. */
void nchw16c_maxpool2_relu_forward_sample(const float *xs, const float *b, float *y, int32_t *arg, int C, int N, int n,
                                          int H, int W, int ld);
void nchw16c_relu_maxpool2_backward_sample(const float *dy, const float *y, const int32_t *arg, float *dxs, int C,
                                           int N, int n, int H, int W, int ld);
/* xs [C/16][HW][16] = sample n of x [C][N][HW]. */
void nchw16c_blocks_sample(const float *x, float *xs, int C, int N, int n, int HW);
void nchw16c_relu_backward_sample(const float *dxs, const float *y, float *dx, int C, int N, int n, int HW);
/* dst[j][i] = src[i][j] for a 16 x 16 tile, rows lds and ldd apart: the transpose the kernels above use, with
 * AVX-512's 16-lane vectors (wide) or AVX2's 8-lane ones, as each CPU picks; for tests. */
void nchw16c_transpose(const float *src, size_t lds, float *dst, size_t ldd, int wide);
#endif
