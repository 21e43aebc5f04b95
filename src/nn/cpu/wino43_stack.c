#include "nn/cpu/wino43_stack.h"

#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "base/profile.h"
#include "base/threads.h"
#include "nn/cpu/conv1_direct.h"
#include "nn/cpu/nchw16c.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/cpu/wino43.h"
#include "nn/cpu/wino43_pool.h"

/* conv2's geometry (C channels of H x W in, F out) and the buffers for it and `parts` parts, kept from call to
 * call. They are U, Ub the transformed weights, per part one sample's scratch, wino43's sums of conv2's
 * gradients and conv1's, then conv2's totals. */
static struct {
    int C, F, H, W, parts;
    float *U, *Ub, *scratch, *ws, *sums1, *dw2, *db2;
} st;

static int usable(const nn_conv_stack *s)
{
    int H = s->H - 2, W = s->W - 2;
    return conv1_direct_blocks_usable(s->H, s->W, s->F1, s->k, 0) && wino43_usable(s->F1, s->F2, H, W, s->k, 0) &&
           wino43_backward_usable(s->F1, s->F2, H, W, s->k, 0);
}

static void buffers(const nn_conv_stack *s)
{
    int C = s->F1, F = s->F2, H = s->H - 2, W = s->W - 2, parts = omp_get_max_threads();
    if (st.U && st.C == C && st.F == F && st.H == H && st.W == W && st.parts == parts)
        return;
    float *old[] = {st.U, st.Ub, st.scratch, st.ws, st.sums1, st.dw2, st.db2};
    for (size_t i = 0; i < sizeof old / sizeof *old; i++)
        free(old[i]);
    size_t u = wino43_weights_size(C, F) * sizeof(float);
    st.C = C, st.F = F, st.H = H, st.W = W, st.parts = parts;
    st.U = xmalloc_aligned(u);
    st.Ub = xmalloc_aligned(u);
    st.scratch = xmalloc_aligned(parts * wino43_pool_scratch_size(C, H, W, F) * sizeof(float));
    st.ws = xmalloc_aligned(parts * wino43_wgrad_part_size(C, F) * sizeof(float));
    st.sums1 = xmalloc_aligned(parts * conv1_direct_wgrad_part_size(C) * sizeof(float));
    st.dw2 = xmalloc_aligned((size_t)F * C * 9 * sizeof(float));
    st.db2 = xmalloc_aligned((size_t)F * sizeof(float));
}

/* --profile: part 0's thread times its own samples' work (the others do as much at the same time); no other
 * thread touches the stopwatch. */
static void lap(int part, const char *phase)
{
    if (part == 0 && phase)
        profile_lap(phase);
}

/* The sample's conv1 output, written in the forward and long out of cache, asked for while the pool's gradient
 * is computed: the weight gradient's input tiles then read it from L2, not at memory's latency. */
static void prefetch(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i += 64 / sizeof *p)
        __builtin_prefetch(p + i, 0, 2);
}

static int first(const nn_conv_stack *s, int part) { return wino43_part_first(s->N, st.parts, part); }

int wino43_stack_forward(const nn_conv_stack *s)
{
    if (!usable(s))
        return 0;
    buffers(s);
    int C = st.C, F = st.F, H = st.H, W = st.W;
    size_t hn = (size_t)C * H * W, xn = (size_t)s->H * s->W;
    wino43_weights(s->w2, F, C, st.U);
    PARALLEL_FOR
    for (int t = 0; t < st.parts; t++) {
        float *ys = st.scratch + t * wino43_pool_scratch_size(C, H, W, F);
        for (int n = first(s, t); n < first(s, t + 1); n++) {
            float *h1 = s->h1 + n * hn;
            conv1_direct_blocks_sample(s->x + n * xn, s->w1, s->b1, h1, s->H, s->W, C);
            lap(t, s->phase1);
            wino43_forward_sample(h1, st.U, NULL, ys, C, H, W, F);
            nchw16c_maxpool2_relu_forward_sample(ys, s->b2, s->py, s->arg, F, s->N, n, H - 2, W - 2, s->ld2);
            lap(t, s->phase2);
        }
    }
    return 1;
}

/* Per sample: the pool's gradient to the part's scratch, conv2's weight-gradient sums and input gradient, then
 * conv1's sums through its ReLU; the parts' sums added in part order. */
int wino43_stack_backward(const nn_conv_stack *s)
{
    if (!usable(s))
        return 0;
    buffers(s);
    int C = st.C, F = st.F, H = st.H, W = st.W, oh = H - 2, ow = W - 2;
    size_t hn = (size_t)C * H * W, xn = (size_t)s->H * s->W, part2 = wino43_wgrad_part_size(C, F),
           part1 = conv1_direct_wgrad_part_size(C);
    wino43_weights_backward(s->w2, F, C, st.Ub);
    PARALLEL_FOR
    for (int t = 0; t < st.parts; t++) {
        float *dys = st.scratch + t * wino43_pool_scratch_size(C, H, W, F), *dxs = dys + (size_t)F * oh * ow;
        wino43_wgrad_start(st.ws + t * part2, C, F);
        memset(st.sums1 + t * part1, 0, part1 * sizeof(float));
        for (int n = first(s, t); n < first(s, t + 1); n++) {
            const float *h1 = s->h1 + n * hn;
            prefetch(h1, hn);
            nchw16c_relu_maxpool2_backward_sample(s->dpy, s->py, s->arg, dys, F, s->N, n, oh, ow, s->ld2);
            wino43_wgrad_sample(h1, dys, st.ws + t * part2, C, H, W, F);
            wino43_backward_data_sample(dys, st.Ub, dxs, C, H, W, F);
            lap(t, s->phase2);
            conv1_direct_wgrad_blocks_sample(s->x + n * xn, dxs, h1, st.sums1 + t * part1, s->H, s->W, C);
            lap(t, s->phase1);
            if (t == 0 && s->poll) { /* part 0: the main thread (static schedule), MPI's */
                s->poll(s->poll_ctx);
                lap(t, s->phase_poll);
            }
        }
    }
    wino43_wgrad_finish(st.ws, st.parts, st.dw2, st.db2, C, F);
    cpu_add_grads(s->dw2, s->db2, st.dw2, st.db2, (size_t)F * C * 9, F);
    lap(0, s->phase2);
    conv1_direct_wgrad_blocks_finish(st.sums1, st.parts, s->dw1, s->db1, C);
    lap(0, s->phase1);
    return 1;
}
