/* net's conv2 with its pool both ways without a column buffer (the direct conv2, src/gpu/cuda/conv_pool.cu;
 * docs/gpu.md#variants-for-measurement): what one thread of a block computes from the tiles its block staged in
 * shared memory. A CUDA kernel stages (every thread a share), syncs, computes, syncs, per stage.
 * tests/unit/check_conv_pool.c runs the same functions block by block on the CPU (each stage as one thread of one,
 * then every thread's compute) against the CPU layers. Sums use fmaf, so a CPU and a GPU round alike. Shapes
 * (cp_fits): k 3, pad 0, even output sides; the conv's output rows ld long (W when wide, else OW) only as the
 * pool's argmaxes index them. Layouts as layers.h's.
 * - Forward: block (n, g), sample n and output channels f0 = g*CP_FG ..; thread t < OP owns pool window t. It
 *   computes its 2x2 outputs for CP_FG channels, then max (op_max4), bias and ReLU into py [F][N][OP] and arg.
 *   With the fused pool too, it writes dropout1's flatten and dropout (kern_flatten_dropout) into fd.
 * - Weight gradient: block (g, h, s), output channels f0 = g*CPW_FG .., input channels c0 = h*CPW_CC .. and slice
 *   s of the samples. Thread (f, c) owns w's 9 taps of f0 + f from c0 + c (and, in blocks h = 0, thread (f, 0)
 *   the bias of f0 + f). It sums each window's pooled gradient (through the ReLU) times the input patch at the
 *   window's argmax. The sample's input planes are staged in shared memory one float apart in their banks. Each
 *   slice leaves one float partial; the last block of each (g, h) adds them in slice order (in double). Only
 *   each window's argmax has a gradient: a quarter of the products a GEMM over the unpooled gradient makes.
 * - Input gradient: block (n, g), sample n and input channels c0 = g*CPX_CG ..; thread t < H*W/2 owns dx's
 *   elements t and t + H*W/2 of each. It computes the transposed convolution of the unpooled gradient, rebuilt
 *   in shared memory from the pooled one and the argmaxes CPX_FC channels at a time (a pool window per thread),
 *   then takes it through the input's ReLU. */
#ifndef MNIST_CONV_POOL_KERNELS_H
#define MNIST_CONV_POOL_KERNELS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/host_device.h"
#include "nn/backend.h"
#include "gpu/kernels.h"
#include "nn/ops.h"

/* Tiles.
 * - Forward: CP_FG output channels per block, CP_CC input channels per stage, CP_THREADS threads (one per pool
 *   window), input planes up to CP_HW_MAX (net's conv2: 26x26).
 * - Weight gradient: CPW_FG output and CPW_CC input channels per block, samples in up to CPW_SLICES slices. At
 *   most CPW_GROUPS_MAX groups of output channels and CPW_C_MAX input channels (the partials' scratch, and a
 *   device counter per block of both). The staged planes are HW + 1 apart, each channel's staged gradients
 *   CPW_LDG apart (a warp's four channels in four banks). A staged input plane serves CPW_FG output channels:
 *   per sample the block's CPW_THREADS threads stage CPW_FG * OP gradients and CPW_CC planes for
 *   CPW_FG * CPW_CC * 9 * OP products.
 * - Input gradient: CPX_CG input channels per block, CPX_FC output channels per stage, padded planes up to
 *   CPX_PAD_MAX. */
enum {
    CP_FG = 16,
    CP_CC = 8,
    CP_THREADS = 160,
    CP_HW_MAX = 26 * 26,
    CPW_FG = 16,
    CPW_CC = 8,
    CPW_THREADS = CPW_FG * CPW_CC,
    CPW_SLICES = 16,
    CPW_GROUPS_MAX = 16,
    CPW_C_MAX = 32,
    CPW_XS = CPW_CC * (CP_HW_MAX + 1),
    CPW_LDG = CP_THREADS + 1,
    CPX_CG = 8,
    CPX_FC = 8,
    CPX_THREADS = 352,
    CPX_PAD_MAX = (26 + 2) * (26 + 2)
};

/* Whether these kernels take the shape: each block's tiles fit its shared memory and threads. */
static inline HD int cp_fits(int C, int H, int W, int F, int k, int pad)
{
    int OH = H - 2, OW = W - 2;
    return k == 3 && pad == 0 && OH > 0 && OW > 0 && OH % 2 == 0 && OW % 2 == 0 && C % CP_CC == 0 && C % CPX_CG == 0 &&
           C % CPW_CC == 0 && C <= CPW_C_MAX && F % CP_FG == 0 && F % CPX_FC == 0 && F % CPW_FG == 0 &&
           F / CPW_FG <= CPW_GROUPS_MAX && H * W <= CP_HW_MAX && (OH / 2) * (OW / 2) <= CP_THREADS &&
           (H + 2) * (W + 2) <= CPX_PAD_MAX && H * W <= 2 * CPX_THREADS;
}

/* The floats of partials the weight gradient needs at most (any shape cp_fits takes). */
static inline HD size_t cpw_part_floats(void)
{
    return (size_t)CPW_SLICES * CPW_GROUPS_MAX * CPW_FG * (CPW_C_MAX * 9 + 1);
}

/* Four weights to consecutive output channels, read as one 16-byte load where the staged weights are aligned. */
typedef struct {
    float v[4];
} __attribute__((aligned(16))) cp_w4;

/* Forward, stage c0 of block (n, f0) by thread tid of nt: xs [CP_CC][H*W] input planes c0 .. of sample n, ws
 * [CP_CC][9][CP_FG] (output channels last: a thread reads four at once) their weights to channels f0 ... */
static inline HD void cp_stage(unsigned tid, unsigned nt, const float *x, const float *w, float *xs, cp_w4 *ws, int C,
                               int N, int H, int W, int n, int f0, int c0)
{
    uint32_t HW = (uint32_t)(H * W);
    for (uint32_t i = tid; i < CP_CC * HW; i += nt) {
        uint32_t c = i / HW;
        xs[i] = x[((size_t)(c0 + (int)c) * (size_t)N + (size_t)n) * HW + (i - c * HW)];
    }
    for (uint32_t i = tid; i < CP_CC * 9 * CP_FG; i += nt) {
        uint32_t c = i / (9 * CP_FG), t = (i / CP_FG) % 9, f = i % CP_FG;
        ws[i / 4].v[i % 4] = w[((size_t)(f0 + (int)f) * (size_t)C + (size_t)(c0 + (int)c)) * 9 + t];
    }
}

/* Thread t's window (ph, pw): acc[f][0..3] (outputs (2ph, 2pw), (2ph, 2pw+1), (2ph+1, 2pw), (2ph+1, 2pw+1)) += the
 * stage's taps, channel by channel. */
static inline HD void cp_window_acc(const float *xs, const cp_w4 *ws, int H, int W, int ph, int pw, float acc[CP_FG][4])
{
    for (int c = 0; c < CP_CC; c++) {
        const float *p = xs + c * H * W + 2 * ph * W + 2 * pw;
        float v[4][4];
        HD_UNROLL
        for (int r = 0; r < 4; r++) {
            HD_UNROLL
            for (int q = 0; q < 4; q++)
                v[r][q] = p[r * W + q];
        }
        HD_UNROLL
        for (int t = 0; t < 9; t++) {
            int r = t / 3, q = t % 3;
            HD_UNROLL
            for (int f4 = 0; f4 < CP_FG / 4; f4++) {
                cp_w4 w4 = ws[(c * 9 + t) * (CP_FG / 4) + f4];
                HD_UNROLL
                for (int e = 0; e < 4; e++) {
                    float wv = w4.v[e];
                    int f = f4 * 4 + e;
                    acc[f][0] = fmaf(wv, v[r][q], acc[f][0]);
                    acc[f][1] = fmaf(wv, v[r][q + 1], acc[f][1]);
                    acc[f][2] = fmaf(wv, v[r + 1][q], acc[f][2]);
                    acc[f][3] = fmaf(wv, v[r + 1][q + 1], acc[f][3]);
                }
            }
        }
    }
}

/* Channel f's pooled output of window t from its outputs v (op_max4's order): py and arg (b NULL: no bias), then
 * unless fd is NULL its flattened place in fd->f with dropout (kern_flatten_dropout reads py back). */
static inline HD void cp_channel_out(const float v[4], const float *b, float *py, int32_t *arg,
                                     const nn_flat_dropout *fd, int F, int N, int OH, int OW, int ld, int n, int f,
                                     int t)
{
    int OP = (OH / 2) * (OW / 2), ph = t / (OW / 2), pw = t % (OW / 2);
    int32_t a;
    float m = op_max4(v[0], v[1], v[2], v[3], 2 * ph * ld + 2 * pw, ld, &a);
    size_t o = ((size_t)f * (size_t)N + (size_t)n) * (size_t)OP + (size_t)t;
    py[o] = b ? op_bias_relu(m, b[f]) : op_relu(m);
    arg[o] = a;
    if (fd)
        kern_flatten_dropout(((size_t)n * (size_t)F + (size_t)f) * (size_t)OP + (size_t)t, py, fd->f, fd->mask, F, N,
                             OP, fd->ids, fd->key, fd->layer, fd->p);
}

/* Thread t's pooled outputs: window t's for channels f0 .. (cp_channel_out). */
static inline HD void cp_window_out(float acc[CP_FG][4], const float *b, float *py, int32_t *arg,
                                    const nn_flat_dropout *fd, int F, int N, int OH, int OW, int ld, int n, int f0,
                                    int t)
{
    HD_UNROLL
    for (int f = 0; f < CP_FG; f++)
        cp_channel_out(acc[f], b, py, arg, fd, F, N, OH, OW, ld, n, f0 + f, t);
}

/* The backward's pooled gradients: dpy [F][N][OP], or (df not NULL: with the fused pool too) fc1's flattened
 * input gradient df [N][F*OP] times dropout1's mask (NULL: none) at the flattened place (kern_dropout_unflatten's
 * product); py the pooled ReLU output they go through. */
typedef struct {
    const float *dpy, *df, *mask, *py;
    int F, N, OP;
} cp_grads;

/* The gradient of channel c's pooled output q of sample n, through the ReLU. */
static inline HD float cp_grad(const cp_grads *s, int c, int n, uint32_t q)
{
    size_t o = ((size_t)c * (size_t)s->N + (size_t)n) * (size_t)s->OP + q;
    size_t j = ((size_t)n * (size_t)s->F + (size_t)c) * (size_t)s->OP + q;
    float g = !s->df ? s->dpy[o] : s->mask ? s->df[j] * s->mask[j] : s->df[j];
    return op_relu_grad(g, s->py[o]);
}

/* Weight gradient, sample n's stage of block (f0, c0, s): xs [CPW_CC][H*W + 1] its input planes c0 .., gs
 * [CPW_FG][CPW_LDG] the pooled gradients of channels f0 .. (cp_grad), offs their argmaxes' offsets in an input plane
 * (rows W long). */
static inline HD void cpw_stage(unsigned tid, unsigned nt, const float *x, const cp_grads *src, const int32_t *arg,
                                float *xs, float *gs, int32_t *offs, int N, int H, int W, int OP, int ld, int n, int f0,
                                int c0)
{
    uint32_t HW = (uint32_t)(H * W);
    for (uint32_t i = tid; i < CPW_CC * HW; i += nt) {
        uint32_t c = i / HW, j = i - c * HW;
        xs[c * (HW + 1) + j] = x[((size_t)(c0 + (int)c) * (size_t)N + (size_t)n) * HW + j];
    }
    for (uint32_t i = tid; i < CPW_FG * (uint32_t)OP; i += nt) {
        uint32_t f = i / (uint32_t)OP, q = i - f * (uint32_t)OP;
        int32_t a = arg[((size_t)(f0 + (int)f) * (size_t)N + (size_t)n) * (size_t)OP + q];
        gs[f * CPW_LDG + q] = cp_grad(src, f0 + (int)f, n, q);
        offs[f * CPW_LDG + q] = a / ld * W + a % ld;
    }
}

/* Thread j = f * CPW_CC + c: acc[t] += the stage's products for tap t of w from c0 + c to f0 + f; with `bias`,
 * acc[9] += the gradients of f0 + f. */
static inline HD void cpw_acc(uint32_t j, const float *xs, const float *gs, const int32_t *offs, int H, int W, int OP,
                              int bias, float acc[10])
{
    uint32_t f = j / CPW_CC, c = j - f * CPW_CC;
    const float *xp = xs + c * (uint32_t)(H * W + 1);
    for (int q = 0; q < OP; q++) {
        float g = gs[f * CPW_LDG + (uint32_t)q];
        const float *p = xp + offs[f * CPW_LDG + (uint32_t)q];
        HD_UNROLL
        for (int t = 0; t < 9; t++)
            acc[t] = fmaf(g, p[t / 3 * W + t % 3], acc[t]);
        if (bias)
            acc[9] += g;
    }
}

/* Thread j's partials of slice s into part [slices][F][C*9 + 1] (the last entry of a channel its bias). */
static inline HD void cpw_part(uint32_t j, const float acc[10], float *part, int C, int F, int f0, int c0, int bias,
                               int s)
{
    uint32_t f = j / CPW_CC, c = j - f * CPW_CC, K = (uint32_t)C * 9;
    float *row = part + ((size_t)s * (size_t)F + (size_t)f0 + f) * (K + 1);
    for (uint32_t t = 0; t < 9; t++)
        row[((uint32_t)c0 + c) * 9 + t] = acc[t];
    if (bias)
        row[K] = acc[9];
}

/* The entries of block (f0, c0)'s second pass: its CPW_FG * CPW_CC * 9 weights and, where c0 is 0, its CPW_FG
 * biases. */
static inline HD uint32_t cpw_entries(int c0) { return CPW_FG * (CPW_CC * 9 + (c0 == 0)); }

/* The second pass of block (f0, c0)'s entry e < cpw_entries(c0), after all its slices: dw or db += the slices'
 * partials, in slice order. */
static inline HD void cpw_finish(uint32_t e, const float *part, int slices, float *dw, float *db, int C, int F, int f0,
                                 int c0)
{
    uint32_t row = CPW_CC * 9 + (c0 == 0), f = (uint32_t)f0 + e / row, j = e % row, K1 = (uint32_t)C * 9 + 1;
    uint32_t k = j == CPW_CC * 9 ? K1 - 1 : (uint32_t)c0 * 9 + j; /* its place in a partial's row */
    double s = 0.0;
    for (int sl = 0; sl < slices; sl++)
        s += part[((size_t)sl * (size_t)F + f) * K1 + k];
    if (k + 1 == K1)
        db[f] += (float)s;
    else
        dw[(size_t)f * (K1 - 1) + k] += (float)s;
}

/* Input gradient, stage f0 of block (n, c0). ds [CPX_FC][OH+4][OW+4] is the convolution's output gradient of
 * channels f0 .. for sample n, with 2 zeros around each plane (every tap of every dx element in range). ws
 * [CPX_FC][9][CPX_CG] holds the weights from channels c0 ... A thread stages whole pool windows (cpx_window), so
 * each window's argmax and gradient are read once; the borders, which no stage writes, are zeroed once per block
 * (cpx_clear). */
static inline HD int cpx_border(uint32_t i, uint32_t PW, uint32_t PP, int OH, int OW)
{
    uint32_t r = i % PP, y = r / PW, xq = r - y * PW;
    return y < 2 || y >= (uint32_t)OH + 2 || xq < 2 || xq >= (uint32_t)OW + 2;
}

static inline HD void cpx_clear(unsigned tid, unsigned nt, float *ds, int OH, int OW)
{
    uint32_t PW = (uint32_t)OW + 4, PP = ((uint32_t)OH + 4) * PW;
    for (uint32_t i = tid; i < CPX_FC * PP; i += nt)
        if (cpx_border(i, PW, PP, OH, OW))
            ds[i] = 0.0f;
}

/* Channel f's pool window q of sample n: v[0..3] its 2x2 elements of the convolution's output gradient (rows, then
 * columns), the pooled gradient (cp_grad) at the argmax and 0 elsewhere; the window's place in a padded plane PW
 * wide. */
static inline HD uint32_t cpx_window(const cp_grads *src, const int32_t *arg, int OW, int ld, int n, int f, uint32_t q,
                                     uint32_t PW, float v[4])
{
    uint32_t oy = q / (uint32_t)(OW / 2) * 2, ox = q % (uint32_t)(OW / 2) * 2;
    int32_t a = arg[((size_t)f * (size_t)src->N + (size_t)n) * (size_t)src->OP + q];
    float g = cp_grad(src, f, n, q);
    for (uint32_t e = 0; e < 4; e++)
        v[e] = op_window_grad(g, a, (int)((oy + e / 2) * (uint32_t)ld + ox + e % 2));
    return (oy + 2) * PW + ox + 2;
}

static inline HD void cpx_stage(unsigned tid, unsigned nt, const cp_grads *src, const int32_t *arg, const float *w,
                                float *ds, cp_w4 *ws, int C, int OH, int OW, int ld, int n, int c0, int f0)
{
    uint32_t PW = (uint32_t)OW + 4, PP = ((uint32_t)OH + 4) * PW, OP = (uint32_t)src->OP;
    for (uint32_t i = tid; i < CPX_FC * OP; i += nt) {
        uint32_t f = i / OP;
        float v[4];
        float *d = ds + f * PP + cpx_window(src, arg, OW, ld, n, f0 + (int)f, i - f * OP, PW, v);
        d[0] = v[0], d[1] = v[1], d[PW] = v[2], d[PW + 1] = v[3];
    }
    for (uint32_t i = tid; i < CPX_FC * 9 * CPX_CG; i += nt) {
        uint32_t f = i / (9 * CPX_CG), t = (i / CPX_CG) % 9, c = i % CPX_CG;
        ws[i / 4].v[i % 4] = w[((size_t)(f0 + (int)f) * (size_t)C + (size_t)c0 + c) * 9 + t];
    }
}

/* Thread t < H*W/2, dx's elements t and t + H*W/2 (e = 0, 1; element (y, x) = (i / W, i % W)): acc[e][c] += the
 * stage's dY(y - ky, x - kx) w[f][c][ky][kx]. */
static inline HD void cpx_acc(uint32_t t, const float *ds, const cp_w4 *ws, int H, int W, float acc[2][CPX_CG])
{
    uint32_t OW = (uint32_t)W - 2, PW = OW + 4, PP = ((uint32_t)H + 2) * PW, half = (uint32_t)(H * W) / 2;
    uint32_t at[2];
    for (uint32_t e = 0; e < 2; e++) {
        uint32_t i = t + e * half, y = i / (uint32_t)W;
        at[e] = (y + 2) * PW + i - y * (uint32_t)W + 2;
    }
    for (int f = 0; f < CPX_FC; f++) {
        HD_UNROLL
        for (int tap = 0; tap < 9; tap++) {
            uint32_t back = (uint32_t)f * PP - (uint32_t)(tap / 3) * PW - (uint32_t)(tap % 3);
            float d0 = ds[at[0] + back], d1 = ds[at[1] + back];
            HD_UNROLL
            for (int c4 = 0; c4 < CPX_CG / 4; c4++) {
                cp_w4 w4 = ws[(f * 9 + tap) * (CPX_CG / 4) + c4];
                HD_UNROLL
                for (int e = 0; e < 4; e++) {
                    acc[0][c4 * 4 + e] = fmaf(w4.v[e], d0, acc[0][c4 * 4 + e]);
                    acc[1][c4 * 4 + e] = fmaf(w4.v[e], d1, acc[1][c4 * 4 + e]);
                }
            }
        }
    }
}

/* Thread t's dx of channels c0 .. for sample n, through the ReLU whose output x_relu is (NULL: none). */
static inline HD void cpx_out(uint32_t t, float acc[2][CPX_CG], const float *x_relu, float *dx, int N, int H, int W,
                              int n, int c0)
{
    uint32_t half = (uint32_t)(H * W) / 2;
    for (uint32_t e = 0; e < 2; e++)
        for (int c = 0; c < CPX_CG; c++) {
            size_t o = ((size_t)(c0 + c) * (size_t)N + (size_t)n) * (size_t)(H * W) + t + e * half;
            dx[o] = x_relu ? op_relu_grad(acc[e][c], x_relu[o]) : acc[e][c];
        }
}
#endif
