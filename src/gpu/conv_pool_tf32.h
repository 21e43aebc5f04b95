/* conv2 direct's forward and input gradient on tensor cores: src/gpu/cuda/conv_pool.cu's k_cpt_forward and k_cpxt_xgrad
 * (the latter described below). The direct conv2 makes one TF32 product per pair with --precision tf32, and three
 * in its 3xTF32 form otherwise (tf32_split; docs/gpu.md#variants-for-measurement).
 * The forward is an implicit GEMM, D[pixel][f] = sum over k = c*9 + tap of x[c][pixel + tap] w[f][c][tap], in
 * mma.sync.m16n8k8 tiles (TF32 inputs, fp32 sums), with conv_pool_kernels.h's pool, bias, ReLU and dropout as its
 * epilogue. What one lane computes follows the PTX ISA's fragment layouts for that shape (lane = 4g + t):
 * - A (16 x 8, row major): a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
 * - B (8 x 8): b0 (k t, column g), b1 (k t + 4, column g);
 * - C and D (16 x 8): c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
 * Block (n, h): sample n, output channels f0 = h*CPT_F ..; warp p owns pool windows 8p .. 8p + 7, as the rows of
 * two m16 tiles. Tile mt, row g + 8d is window 8p + g's output (2wy + mt, 2wx + d), so each lane holds whole
 * windows (the pool needs no shuffles). Its c0/c2 of both tiles are channel 2t's four outputs of window 8p + g,
 * c1/c3 channel 2t + 1's, for each n8 tile of channels. Operands are rounded to TF32 as they are staged (op_tf32,
 * as cvt.rna.tf32.f32 would), or staged whole and split per fragment for 3xTF32.
 * tests/unit/check_conv_pool.c runs these functions for every lane of every warp, with the mma emulated in that
 * layout, against the CPU's im2col, GEMM, pool and col2im. */
#ifndef MNIST_CONV_POOL_TF32_H
#define MNIST_CONV_POOL_TF32_H
#include <stdint.h>
#include <string.h>

#include "gpu/conv_pool_kernels.h"

/* Tiles: CPT_F output channels per block (CPT_NT n8 tiles), CPT_CC input channels per stage (CPT_K of the k
 * dimension: CPT_K / 8 mma steps). Weight rows lie CPT_LDW apart in shared memory (a warp's B loads hit 32 banks);
 * CPT_WARPS warps of 8 windows each. Half of conv2's 64 channels a block: 128 blocks at batch 64, so that the
 * grid covers an H100's or H200's 132 SMs nearly (tests/gpu/gpu-mock-grid.sh). */
enum {
    CPT_F = 32,
    CPT_NT = CPT_F / 8,
    CPT_CC = 8,
    CPT_K = CPT_CC * 9,
    CPT_LDW = CPT_F + 8,
    CPT_WARPS = 18,
    CPT_THREADS = CPT_WARPS * 32
};

/* Whether k_cpt_forward takes the shape (else conv2 direct's fp32 forward runs). */
static inline HD int cpt_fits(int C, int H, int W, int F, int k, int pad)
{
    return cp_fits(C, H, W, F, k, pad) && C % CPT_CC == 0 && F % CPT_F == 0 &&
           ((H - 2) / 2) * ((W - 2) / 2) <= CPT_WARPS * 8;
}

/* v rounded to TF32 (10 mantissa bits): to nearest, ties away from zero, as float bits whose low 13 are zero (the
 * rounding of cvt.rna.tf32.f32 for finite values). */
static inline HD uint32_t op_tf32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u + 0x1000u) & 0xffffe000u;
}

/* A staged operand: rounded to TF32 for one product per pair (op_tf32), or whole for three (split: tf32_split). */
static inline HD uint32_t tf32_stage(float v, int split)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return split ? u : op_tf32(v);
}

/* 3xTF32 (the direct conv2's 3xTF32 form, outside --precision tf32): v = big + small, both TF32 (big = op_tf32(v),
 * small = op_tf32(v - big), v - big exact in fp32). small*big' + big*small' + big*big' is v*v' within about 2^-21
 * of it (small*small' and the rounding of the small parts left out): fp32's accuracy from three TF32 products. */
static inline HD void tf32_split(uint32_t v, uint32_t *big, uint32_t *small)
{
    float f, b;
    memcpy(&f, &v, sizeof f);
    *big = op_tf32(f);
    memcpy(&b, big, sizeof b);
    *small = op_tf32(f - b);
}

/* Stage c0 of block (n, f0): xs [CPT_CC][H*W] sample n's input planes c0 .., ws [CPT_K][CPT_LDW] the weights of
 * f0 .. from them (row k = c*9 + tap), both as tf32_stage stages them. */
static inline HD void cpt_stage(unsigned tid, unsigned nt, const float *x, const float *w, uint32_t *xs, uint32_t *ws,
                                int C, int N, int H, int W, int n, int f0, int c0, int split)
{
    uint32_t HW = (uint32_t)(H * W);
    for (uint32_t i = tid; i < CPT_CC * HW; i += nt) {
        uint32_t c = i / HW;
        xs[i] = tf32_stage(x[((size_t)(c0 + (int)c) * (size_t)N + (size_t)n) * HW + (i - c * HW)], split);
    }
    for (uint32_t i = tid; i < CPT_K * CPT_F; i += nt) {
        uint32_t f = i / CPT_K, k = i - f * CPT_K;
        ws[k * CPT_LDW + f] = tf32_stage(w[((size_t)(f0 + (int)f) * (size_t)C + (size_t)c0) * 9 + k], split);
    }
}

/* Lane's window in warp p: 8p + g, or -1 past the OP windows (its rows then read window 0 and write nothing). */
static inline HD int cpt_window(unsigned p, unsigned lane, int OP)
{
    int win = (int)(p * 8 + lane / 4);
    return win < OP ? win : -1;
}

/* Offsets in a staged plane of the lane's A rows: pix[mt][d] = its window's output (2wy + mt, 2wx + d). */
static inline HD void cpt_rows(unsigned p, unsigned lane, int W, int OP, uint32_t pix[2][2])
{
    int win = cpt_window(p, lane, OP), OW2 = (W - 2) / 2;
    if (win < 0)
        win = 0;
    uint32_t y = 2 * (uint32_t)(win / OW2), x = 2 * (uint32_t)(win % OW2);
    for (uint32_t mt = 0; mt < 2; mt++)
        for (uint32_t d = 0; d < 2; d++)
            pix[mt][d] = (y + mt) * (uint32_t)W + x + d;
}

/* Where row k = c*9 + tap of the stage starts in xs, relative to an output's pixel. */
static inline HD uint32_t cpt_k_offset(uint32_t k, int H, int W)
{
    uint32_t c = k / 9, tap = k - c * 9;
    return c * (uint32_t)(H * W) + (tap / 3) * (uint32_t)W + tap % 3;
}

/* The lane's A fragments for an mma step: a[mt] of m16 tile mt, read from xs. The offsets are the lane's rows
 * (rows[mt][0] for row g, rows[mt][1] for g + 8) plus where the step's rows k0 + t and k0 + t + 4 start (o0, o1). */
static inline HD void tf32_frag_a(const uint32_t *xs, uint32_t o0, uint32_t o1, const uint32_t rows[2][2],
                                  uint32_t a[2][4])
{
    HD_UNROLL
    for (int mt = 0; mt < 2; mt++) {
        a[mt][0] = xs[o0 + rows[mt][0]];
        a[mt][1] = xs[o0 + rows[mt][1]];
        a[mt][2] = xs[o1 + rows[mt][0]];
        a[mt][3] = xs[o1 + rows[mt][1]];
    }
}

/* The lane's B fragment of n8 tile j for the mma step whose k runs from k0: ws's rows k0 + t and k0 + t + 4 (ldw
 * apart), column 8j + g. */
static inline HD void tf32_frag_b(const uint32_t *ws, uint32_t ldw, unsigned lane, uint32_t k0, int j, uint32_t b[2])
{
    uint32_t g = lane / 4, t = lane % 4;
    b[0] = ws[(k0 + t) * ldw + (uint32_t)j * 8 + g];
    b[1] = ws[(k0 + t + 4) * ldw + (uint32_t)j * 8 + g];
}

/* The forward's A fragments for mma step s of the stage (k = 8s ..); its B fragments are tf32_frag_b's of ws,
 * CPT_LDW apart. */
static inline HD void cpt_frag_a(const uint32_t *xs, unsigned lane, int H, int W, const uint32_t pix[2][2], int s,
                                 uint32_t a[2][4])
{
    uint32_t k = (uint32_t)s * 8 + lane % 4;
    tf32_frag_a(xs, cpt_k_offset(k, H, W), cpt_k_offset(k + 4, H, W), pix, a);
}

/* The lane's outputs after the last stage, through cp_channel_out: for each n8 tile j and e = 0, 1, channel
 * f0 + 8j + 2t + e's window. The outputs are in op_max4's order: (0, 0) c[e] of tile 0, (0, 1) its c[2 + e],
 * then tile 1's. */
static inline HD void cpt_out(unsigned p, unsigned lane, float acc[2][CPT_NT][4], const float *b, float *py,
                              int32_t *arg, const nn_flat_dropout *fd, int F, int N, int OH, int OW, int ld, int n,
                              int f0)
{
    int win = cpt_window(p, lane, (OH / 2) * (OW / 2));
    if (win < 0)
        return;
    int t = (int)(lane % 4);
    HD_UNROLL
    for (int j = 0; j < CPT_NT; j++) {
        HD_UNROLL
        for (int e = 0; e < 2; e++) {
            float v[4] = {acc[0][j][e], acc[0][j][2 + e], acc[1][j][e], acc[1][j][2 + e]};
            cp_channel_out(v, b, py, arg, fd, F, N, OH, OW, ld, n, f0 + 8 * j + 2 * t + e, win);
        }
    }
}

/* The input gradient on tensor cores (k_cpxt_xgrad), the transposed convolution as an implicit GEMM:
 * dx[c][i] = sum over k = f*9 + tap of dY[f][i - tap] w[f][c][tap], rows i the input's elements, columns c.
 * Block n: sample n, input channels c0 = h*CPXT_C ..; warp p owns elements 32p .. 32p + 31 (tile mt, row g + 8d:
 * element 32p + 16mt + g + 8d). Each lane owns channels 8j + 2t and 8j + 2t + 1 of every n8 tile j. The unpooled
 * gradient is staged as cpx_stage stages it, CPXT_FC output channels at a time (tf32_stage); conv1's ReLU
 * backward is its epilogue. */
enum {
    CPXT_C = 16, /* half of conv2's 32 input channels a block: 128 blocks at batch 64, as k_cpt_forward's */
    CPXT_NT = CPXT_C / 8,
    CPXT_FC = 8,
    CPXT_K = CPXT_FC * 9,
    CPXT_LDW = CPXT_C + 8,
    CPXT_WARPS = 22,
    CPXT_THREADS = CPXT_WARPS * 32
};

/* Whether k_cpxt_xgrad takes the shape (else conv2 direct's fp32 input gradient runs). */
static inline HD int cpxt_fits(int C, int H, int W, int F, int k, int pad)
{
    return cp_fits(C, H, W, F, k, pad) && C % CPXT_C == 0 && F % CPXT_FC == 0 && H * W <= CPXT_WARPS * 32;
}

/* The padded planes' borders of ds (cpx_clear's): zeros, once per block; no stage writes them. */
static inline HD void cpxt_clear(unsigned tid, unsigned nt, uint32_t *ds, int H, int W)
{
    uint32_t PW = (uint32_t)W + 2, PP = ((uint32_t)H + 2) * PW;
    for (uint32_t i = tid; i < CPXT_FC * PP; i += nt)
        if (cpx_border(i, PW, PP, H - 2, W - 2))
            ds[i] = tf32_stage(0.0f, 0);
}

/* Stage f0 of block (n, c0): ds [CPXT_FC][H+2][W+2] cpx_stage's planes (a pool window per thread), ws
 * [CPXT_K][CPXT_LDW] the weights from c0 .. (row k = f*9 + tap), both as tf32_stage stages them. */
static inline HD void cpxt_stage(unsigned tid, unsigned nt, const cp_grads *src, const int32_t *arg, const float *w,
                                 uint32_t *ds, uint32_t *ws, int C, int H, int W, int ld, int n, int c0, int f0,
                                 int split)
{
    uint32_t PW = (uint32_t)W + 2, PP = ((uint32_t)H + 2) * PW, OP = (uint32_t)src->OP;
    for (uint32_t i = tid; i < CPXT_FC * OP; i += nt) {
        uint32_t f = i / OP;
        float v[4];
        uint32_t *d = ds + f * PP + cpx_window(src, arg, W - 2, ld, n, f0 + (int)f, i - f * OP, PW, v);
        d[0] = tf32_stage(v[0], split), d[1] = tf32_stage(v[1], split);
        d[PW] = tf32_stage(v[2], split), d[PW + 1] = tf32_stage(v[3], split);
    }
    for (uint32_t i = tid; i < CPXT_K * CPXT_C; i += nt) {
        uint32_t c = i / CPXT_K, k = i - c * CPXT_K, f = k / 9;
        ws[k * CPXT_LDW + c] =
            tf32_stage(w[((size_t)(f0 + (int)f) * (size_t)C + (size_t)(c0 + (int)c)) * 9 + k - f * 9], split);
    }
}

/* The lane's element of tile mt, row g + 8d, in warp p; HW or more past the plane. */
static inline HD uint32_t cpxt_element(unsigned p, unsigned lane, int mt, int d)
{
    return p * 32 + (uint32_t)mt * 16 + lane / 4 + (uint32_t)d * 8;
}

/* Where the lane's rows sit in a staged plane: at[mt][d] = element (y, x)'s y*(W+2) + x (element 0 past the
 * plane). */
static inline HD void cpxt_rows(unsigned p, unsigned lane, int H, int W, uint32_t at[2][2])
{
    for (int mt = 0; mt < 2; mt++)
        for (int d = 0; d < 2; d++) {
            uint32_t i = cpxt_element(p, lane, mt, d);
            if (i >= (uint32_t)(H * W))
                i = 0;
            at[mt][d] = i / (uint32_t)W * ((uint32_t)W + 2) + i % (uint32_t)W;
        }
}

/* Where row k = f*9 + tap of the stage sits relative to at[][]: dY[f](y - ky, x - kx) is 2 - ky rows and 2 - kx
 * columns past the padded plane's (y, x). */
static inline HD uint32_t cpxt_k_offset(uint32_t k, int H, int W)
{
    uint32_t f = k / 9, tap = k - f * 9, PW = (uint32_t)W + 2;
    return f * ((uint32_t)H + 2) * PW + (2 - tap / 3) * PW + 2 - tap % 3;
}

/* The input gradient's A fragments for mma step s of the stage; its B fragments are tf32_frag_b's of ws, CPXT_LDW
 * apart. */
static inline HD void cpxt_frag_a(const uint32_t *ds, unsigned lane, int H, int W, const uint32_t at[2][2], int s,
                                  uint32_t a[2][4])
{
    uint32_t k = (uint32_t)s * 8 + lane % 4;
    tf32_frag_a(ds, cpxt_k_offset(k, H, W), cpxt_k_offset(k + 4, H, W), at, a);
}

/* The lane's dx after the last stage, through the ReLU whose output x_relu is (NULL: none). */
static inline HD void cpxt_out(unsigned p, unsigned lane, float acc[2][CPXT_NT][4], const float *x_relu, float *dx,
                               int N, int H, int W, int n, int c0)
{
    uint32_t HW = (uint32_t)(H * W), t = lane % 4;
    for (int mt = 0; mt < 2; mt++)
        for (int j = 0; j < CPXT_NT; j++)
            for (int r = 0; r < 4; r++) {
                uint32_t i = cpxt_element(p, lane, mt, r / 2);
                if (i >= HW)
                    continue;
                size_t o = ((size_t)(c0 + 8 * j + 2 * (int)t + r % 2) * (size_t)N + (size_t)n) * HW + i;
                dx[o] = x_relu ? op_relu_grad(acc[mt][j][r], x_relu[o]) : acc[mt][j][r];
            }
}
#endif
