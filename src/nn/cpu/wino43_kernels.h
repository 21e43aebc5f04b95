/* wino43.h's tiles and the kernels of one instruction set (wino43_v16.h, built for AVX-512 and for AVX2);
 * wino43.c picks the set this CPU runs. */
#ifndef MNIST_WINO43_KERNELS_H
#define MNIST_WINO43_KERNELS_H
#include <stddef.h>

enum {
    LANES = 16,     /* channels per block of the nchw16c.h layouts, one v16 */
    TILE = 4,       /* output pixels per tile side */
    TIN = TILE + 2, /* input pixels per tile side */
    E = TIN * TIN,  /* transformed elements per tile */
    TB = 6,         /* tiles per product block: 6 x 4 accumulators of 16 filters ... */
    TB7 = 7,        /* ... or 7 x 2 (at most 2 vectors of outputs), where the tiles come in sevens */
    MAX_CB = 8,     /* input channel blocks */
    MAX_F = 128,    /* output channels */
    /* The weight gradient's tiles go by blocks of WT, their transforms in buffers that stay in L2 (oneDNN
     * 2.6's Winograd weight gradient writes the whole transformed input and gradient to memory). */
    WT = 12, /* a third of a 24 x 24 plane's tiles */
};

/* Floats from one point's block of V or D to the next: a line more than the block. Then the 36 stores of a
 * tile's transform do not fall in few L1 sets (with WT = 12 the blocks are 1.5 and 3 KB). */
static inline size_t point_stride(int channels) { return (size_t)WT * channels + LANES; }

/* wino43.h's functions of the same names, per sample; wgrad_output: dw [F][C][3][3] from the sums Mw. */
typedef struct {
    const char *isa;
    void (*weights)(const float *w, int F, int C, float *U);
    void (*weights_backward)(const float *w, int F, int C, float *U);
    void (*forward_sample)(const float *x, const float *U, const float *b, float *y, int C, int H, int W, int F);
    void (*backward_data_sample)(const float *dy, const float *U, float *dx, int C, int H, int W, int F);
    void (*wgrad_sample)(const float *x, const float *dy, float *part, int C, int H, int W, int F);
    void (*wgrad_output)(const float *Mw, float *dw, int C, int F);
} wino43_kernels;

extern const wino43_kernels wino43_avx512, wino43_avx2;
#endif
