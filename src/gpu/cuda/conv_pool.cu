// net's conv2 with its pool both ways without a column buffer (MNIST_DDP_CONV2=direct): three kernels where the
// composition runs im2col, three GEMMs, the pool both ways, the bias gradient and col2im. No 46 MB column buffer
// is written and read each step. The forward and input gradient also run on tensor cores (TF32 with --precision
// tf32, 3xTF32 with MNIST_DDP_CONV2=3xtf32). Each block stages its tiles in shared memory and runs
// src/gpu/conv_pool_kernels.h's and conv_pool_tf32.h's per-thread (per-lane) math, which check_conv_pool runs on
// the CPU.
#include "config.h"

#include "gpu/cuda/block_sum.h"
#include "gpu/cuda/conv_pool.h"
#include "gpu/cuda/launch.h"
#include "gpu/cuda/step_scalars.h"
extern "C" {
#include "base/errors.h"
#include "base/profile.h"
#include "gpu/conv_pool_kernels.h"
#include "gpu/conv_pool_tf32.h"
}

__global__ void __launch_bounds__(CP_THREADS)
    k_cp_forward(const float *x, const float *w, const float *b, float *py, int32_t *arg, nn_flat_dropout fd,
                 const kern_scalars *s, int flat, int C, int N, int H, int W, int ld, int F)
{
    fd.key = kern_key(s, fd.key);
    __shared__ float xs[CP_CC * CP_HW_MAX];
    __shared__ cp_w4 ws[CP_CC * 9 * CP_FG / 4];
    int n = (int)blockIdx.x, f0 = (int)blockIdx.y * CP_FG, OW2 = (W - 2) / 2, OP = ((H - 2) / 2) * OW2;
    unsigned t = threadIdx.x;
    float acc[CP_FG][4] = {};
    for (int c0 = 0; c0 < C; c0 += CP_CC) {
        cp_stage(t, blockDim.x, x, w, xs, ws, C, N, H, W, n, f0, c0);
        __syncthreads();
        if (t < (unsigned)OP)
            cp_window_acc(xs, ws, H, W, (int)t / OW2, (int)t % OW2, acc);
        __syncthreads();
    }
    if (t < (unsigned)OP)
        cp_window_out(acc, b, py, arg, flat ? &fd : NULL, F, N, H - 2, W - 2, ld, n, f0, (int)t);
}

// d += a b on the tensor cores: one m16n8k8 TF32 tile, fragments in the layouts conv_pool_tf32.h names.
__device__ static inline void mma_tf32(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One mma step of a warp's tiles: acc[mt][j] += a[mt] b[j] (b[j] tf32_frag_b's of ws from k0), one TF32 product
// per pair or (SPLIT) three, 3xTF32 (conv_pool_tf32.h's tf32_split; the small products first).
template <int SPLIT, int NT>
__device__ static inline void mma_step(float acc[2][NT][4], const uint32_t a[2][4], const uint32_t *ws, uint32_t ldw,
                                       unsigned lane, uint32_t k0)
{
    uint32_t ab[2][4], as[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (SPLIT)
                tf32_split(a[mt][i], &ab[mt][i], &as[mt][i]);
            else
                ab[mt][i] = a[mt][i];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        uint32_t bb[2], bs[2];
        tf32_frag_b(ws, ldw, lane, k0, j, bb);
        if (SPLIT)
            tf32_split(bb[0], &bb[0], &bs[0]), tf32_split(bb[1], &bb[1], &bs[1]);
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            if (SPLIT) {
                mma_tf32(acc[mt][j], as[mt], bb);
                mma_tf32(acc[mt][j], ab[mt], bs);
            }
            mma_tf32(acc[mt][j], ab[mt], bb);
        }
    }
}

template <int SPLIT>
__global__ void __launch_bounds__(CPT_THREADS)
    k_cpt_forward(const float *x, const float *w, const float *b, float *py, int32_t *arg, nn_flat_dropout fd,
                  const kern_scalars *s, int flat, int C, int N, int H, int W, int ld, int F)
{
    fd.key = kern_key(s, fd.key);
    __shared__ uint32_t xs[CPT_CC * CP_HW_MAX], ws[CPT_K * CPT_LDW];
    int n = (int)blockIdx.x, f0 = (int)blockIdx.y * CPT_F, OP = ((H - 2) / 2) * ((W - 2) / 2);
    unsigned lane = threadIdx.x % 32, p = threadIdx.x / 32;
    uint32_t pix[2][2];
    cpt_rows(p, lane, W, OP, pix);
    float acc[2][CPT_NT][4] = {};
    for (int c0 = 0; c0 < C; c0 += CPT_CC) {
        cpt_stage(threadIdx.x, blockDim.x, x, w, xs, ws, C, N, H, W, n, f0, c0, SPLIT);
        __syncthreads();
        for (int s = 0; s < CPT_K / 8; s++) {
            uint32_t a[2][4];
            cpt_frag_a(xs, lane, H, W, pix, s, a);
            mma_step<SPLIT, CPT_NT>(acc, a, ws, CPT_LDW, lane, (uint32_t)s * 8);
        }
        __syncthreads();
    }
    cpt_out(p, lane, acc, b, py, arg, flat ? &fd : NULL, F, N, H - 2, W - 2, ld, n, f0);
}

// Per block (f0, c0) of output and input channels: its slices done (block_sum.h's last_of).
__device__ static unsigned cpw_done[CPW_GROUPS_MAX * (CPW_C_MAX / CPW_CC)];

__global__ void __launch_bounds__(CPW_THREADS)
    k_cp_wgrad(const float *x, cp_grads src, const int32_t *arg, float *part, float *dw, float *db, int C, int N, int H,
               int W, int ld, int F)
{
    __shared__ float xs[CPW_XS], gs[CPW_FG * CPW_LDG];
    __shared__ int32_t offs[CPW_FG * CPW_LDG];
    int f0 = (int)blockIdx.x * CPW_FG, c0 = (int)blockIdx.y * CPW_CC, OP = ((H - 2) / 2) * ((W - 2) / 2);
    unsigned j = threadIdx.x;
    int bias = blockIdx.y == 0 && j % CPW_CC == 0;
    size_t lo, hi;
    op_slice((size_t)N, (int)gridDim.z, (int)blockIdx.z, &lo, &hi);
    float acc[10] = {};
    for (size_t n = lo; n < hi; n++) {
        cpw_stage(j, blockDim.x, x, &src, arg, xs, gs, offs, N, H, W, OP, ld, (int)n, f0, c0);
        __syncthreads();
        cpw_acc(j, xs, gs, offs, H, W, OP, bias, acc);
        __syncthreads();
    }
    cpw_part(j, acc, part, C, F, f0, c0, bias, (int)blockIdx.z);
    __threadfence(); // every thread's partials, before thread 0 takes the block's ticket
    __syncthreads();
    if (last_of(&cpw_done[blockIdx.x * gridDim.y + blockIdx.y], gridDim.z))
        for (unsigned e = j; e < cpw_entries(c0); e += blockDim.x)
            cpw_finish(e, part, (int)gridDim.z, dw, db, C, F, f0, c0);
}

__global__ void __launch_bounds__(CPX_THREADS)
    k_cp_xgrad(cp_grads src, const int32_t *arg, const float *w, const float *x_relu, float *dx, int C, int N, int H,
               int W, int ld, int F)
{
    __shared__ float ds[CPX_FC * CPX_PAD_MAX];
    __shared__ cp_w4 ws[CPX_FC * 9 * CPX_CG / 4];
    int n = (int)blockIdx.x, c0 = (int)blockIdx.y * CPX_CG;
    unsigned t = threadIdx.x, active = (unsigned)(H * W) / 2;
    float acc[2][CPX_CG] = {};
    cpx_clear(t, blockDim.x, ds, H - 2, W - 2); // the borders, apart from what the stages write: no sync needed
    for (int f0 = 0; f0 < F; f0 += CPX_FC) {
        cpx_stage(t, blockDim.x, &src, arg, w, ds, ws, C, H - 2, W - 2, ld, n, c0, f0);
        __syncthreads();
        if (t < active)
            cpx_acc(t, ds, ws, H, W, acc);
        __syncthreads();
    }
    if (t < active)
        cpx_out(t, acc, x_relu, dx, N, H, W, n, c0);
}

template <int SPLIT>
__global__ void __launch_bounds__(CPXT_THREADS)
    k_cpxt_xgrad(cp_grads src, const int32_t *arg, const float *w, const float *x_relu, float *dx, int C, int N, int H,
                 int W, int ld, int F)
{
    __shared__ uint32_t ds[CPXT_FC * CPX_PAD_MAX], ws[CPXT_K * CPXT_LDW];
    int n = (int)blockIdx.x, c0 = (int)blockIdx.y * CPXT_C;
    unsigned lane = threadIdx.x % 32, p = threadIdx.x / 32;
    uint32_t at[2][2];
    cpxt_rows(p, lane, H, W, at);
    float acc[2][CPXT_NT][4] = {};
    cpxt_clear(threadIdx.x, blockDim.x, ds, H, W); // as k_cp_xgrad's
    for (int f0 = 0; f0 < F; f0 += CPXT_FC) {
        cpxt_stage(threadIdx.x, blockDim.x, &src, arg, w, ds, ws, C, H, W, ld, n, c0, f0, SPLIT);
        __syncthreads();
        for (int s = 0; s < CPXT_K / 8; s++) {
            uint32_t a[2][4];
            cpxt_frag_a(ds, lane, H, W, at, s, a);
            mma_step<SPLIT, CPXT_NT>(acc, a, ws, CPXT_LDW, lane, (uint32_t)s * 8);
        }
        __syncthreads();
    }
    cpxt_out(p, lane, acc, x_relu, dx, N, H, W, n, c0);
}

static float *wgrad_part;

void cu_conv_pool_alloc(void)
{
    if (!wgrad_part)
        CUDA_CHECK(cudaMalloc(&wgrad_part, cpw_part_floats() * sizeof *wgrad_part));
}

int cu_conv_pool_covers(int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    (void)wide; // either row length
    return N >= 1 && N <= 65535 && cp_fits(C, H, W, F, k, pad);
}

// The tensor-core kernels where MODE asks for them and their tiles fit the shape, else the fp32 ones.
template <int MODE>
int cu_conv_pool_forward(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                         const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    if (!cu_conv_pool_covers(N, C, H, W, F, k, pad, wide))
        return 0;
    nn_flat_dropout drop = fd ? *fd : nn_flat_dropout{};
    int ld = wide ? W : W - 2;
    const kern_scalars *s = fd && fd->mask ? cu_scalars_key(fd->key) : nullptr; // no mask: no key read
    if (MODE == CP_FP32 || !cpt_fits(C, H, W, F, k, pad))
        LAUNCH_SHAPE(k_cp_forward, dim3((unsigned)N, (unsigned)(F / CP_FG)), CP_THREADS, x, w, pb, py, arg, drop, s,
                     fd != NULL, C, N, H, W, ld, F);
    else
        LAUNCH_SHAPE(k_cpt_forward<MODE == CP_3XTF32>, dim3((unsigned)N, (unsigned)(F / CPT_F)), CPT_THREADS, x, w, pb,
                     py, arg, drop, s, fd != NULL, C, N, H, W, ld, F);
    return 1;
}

template <int MODE>
int cu_pool_conv_backward(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg, const float *x,
                          const float *x_relu, const float *w, float *dw, float *db, float *dx, int N, int C, int H,
                          int W, int F, int k, int pad, int wide)
{
    if (!cu_conv_pool_covers(N, C, H, W, F, k, pad, wide))
        return 0;
    const float *in = x ? x : x_relu; // x NULL: the forward kept it, and it is x_relu's values (layers.h)
    if (!in)
        die(EX_SOFTWARE, "conv2 direct: a backward with neither its input nor the ReLU output it was");
    int ld = wide ? W : W - 2, slices = N < CPW_SLICES ? N : CPW_SLICES;
    cp_grads src = {dpy, fd ? fd->f : NULL, fd ? fd->mask : NULL, py, F, N, ((H - 2) / 2) * ((W - 2) / 2)};
    LAUNCH_SHAPE(k_cp_wgrad, dim3((unsigned)(F / CPW_FG), (unsigned)(C / CPW_CC), (unsigned)slices), CPW_THREADS, in,
                 src, arg, wgrad_part, dw, db, C, N, H, W, ld, F);
    // --profile: the weight gradient apart from the input gradient (the caller's lap), to tell which is slow.
    profile_lap("conv-pool weight gradient");
    if (!dx)
        return 1;
    if (MODE == CP_FP32 || !cpxt_fits(C, H, W, F, k, pad))
        LAUNCH_SHAPE(k_cp_xgrad, dim3((unsigned)N, (unsigned)(C / CPX_CG)), CPX_THREADS, src, arg, w, x_relu, dx, C, N,
                     H, W, ld, F);
    else
        LAUNCH_SHAPE(k_cpxt_xgrad<MODE == CP_3XTF32>, dim3((unsigned)N, (unsigned)(C / CPXT_C)), CPXT_THREADS, src, arg,
                     w, x_relu, dx, C, N, H, W, ld, F);
    return 1;
}

template int cu_conv_pool_forward<CP_FP32>(const float *, const float *, const float *, float *, int32_t *,
                                           const nn_flat_dropout *, int, int, int, int, int, int, int, int);
template int cu_conv_pool_forward<CP_TF32>(const float *, const float *, const float *, float *, int32_t *,
                                           const nn_flat_dropout *, int, int, int, int, int, int, int, int);
template int cu_conv_pool_forward<CP_3XTF32>(const float *, const float *, const float *, float *, int32_t *,
                                             const nn_flat_dropout *, int, int, int, int, int, int, int, int);
template int cu_pool_conv_backward<CP_FP32>(float *, const nn_flat_dropout *, const float *, const int32_t *,
                                            const float *, const float *, const float *, float *, float *, float *, int,
                                            int, int, int, int, int, int, int);
template int cu_pool_conv_backward<CP_TF32>(float *, const nn_flat_dropout *, const float *, const int32_t *,
                                            const float *, const float *, const float *, float *, float *, float *, int,
                                            int, int, int, int, int, int, int);
template int cu_pool_conv_backward<CP_3XTF32>(float *, const nn_flat_dropout *, const float *, const int32_t *,
                                              const float *, const float *, const float *, float *, float *, float *,
                                              int, int, int, int, int, int, int, int);
