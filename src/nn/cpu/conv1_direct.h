/* net's conv1 (one input channel, 3x3, no padding) as a direct convolution with AVX-512: 16 output pixels of a
 * row per vector, the nine shifted input vectors in registers for four filters at a time; forward with its bias
 * and ReLU, weight and bias gradients summed by parts of the batch (one per thread, added in part order). It
 * replaces im2col and a K = 9 GEMM, too small for OpenBLAS to run well. */
#ifndef MNIST_CONV1_DIRECT_H
#define MNIST_CONV1_DIRECT_H

/* Whether this CPU and shape can take it: AVX-512, a 3x3 kernel without padding, output rows of up to 32
 * pixels, F a multiple of 4. */
int conv1_direct_usable(int H, int W, int F, int k, int pad);
/* y [F][N][H-2][W-2] = relu(conv(x [1][N][H][W], w [F][1][3][3]) + b) where usable (backend.h's
 * conv1_bias_relu_forward), else 0 having done nothing. */
int conv1_direct_bias_relu(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F, int k,
                           int pad);
/* dw [F][1][3][3] and db [F] += the gradients from x and dy [F][N][H-2][W-2], in parts parts. */
void conv1_direct_backward(const float *x, const float *dy, float *dw, float *db, int parts, int N, int H, int W,
                           int F);
#endif
