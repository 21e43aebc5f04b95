#include "nn/cpu/conv1_direct.h"

#include <stdlib.h>

#include "base/errors.h"
#include "base/threads.h"
#include "nn/cpu/cpu_isa.h"
#include "nn/cpu/wino43.h"

enum {
    LANES = 16,
    TAPS = 9,
    FG = 4,    /* filters per pass of the forward */
    SUMS = 10, /* per filter: the nine taps' and the bias's */
};

/* The kernels of the widest ISA this CPU (and ONEDNN_MAX_CPU_ISA) allows, or NULL. */
static const conv1_direct_kernels *kernels(void) { return cpu_isa_pick(&conv1_direct_avx512, &conv1_direct_avx2); }

int conv1_direct_usable(int H, int W, int F, int k, int pad)
{
    return k == 3 && !pad && W - 2 <= 2 * LANES && W >= 3 && H >= 3 && F % FG == 0 && kernels();
}

int conv1_direct_bias_relu(const float *x, const float *w, const float *b, float *y, int N, int H, int W, int F, int k,
                           int pad)
{
    if (!conv1_direct_usable(H, W, F, k, pad))
        return 0;
    const conv1_direct_kernels *K = kernels();
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        K->forward_sample(x + (size_t)n * H * W, w, b, y, N, n, H, W, F);
    return 1;
}

/* The lanes of a part's sum, added in lane order. */
static float lane_sum(const float *v)
{
    float s = 0;
    for (int l = 0; l < LANES; l++)
        s += v[l];
    return s;
}

void conv1_direct_backward(const float *x, const float *dy, float *dw, float *db, int parts, int N, int H, int W, int F)
{
    size_t part = (size_t)F * SUMS * LANES;
    float *sums = xcalloc((size_t)parts * part, sizeof *sums);
    const conv1_direct_kernels *K = kernels();
    PARALLEL_FOR
    for (int p = 0; p < parts; p++)
        for (int n = wino43_part_first(N, parts, p); n < wino43_part_first(N, parts, p + 1); n++)
            K->backward_sample(x + (size_t)n * H * W, dy, sums + p * part, N, n, H, W, F);
    for (int p = 0; p < parts; p++) /* in part order: the same bits for the same number of parts */
        for (int f = 0; f < F; f++) {
            const float *s = sums + p * part + (size_t)f * SUMS * LANES;
            for (int t = 0; t < TAPS; t++)
                dw[f * TAPS + t] += lane_sum(s + t * LANES);
            db[f] += lane_sum(s + TAPS * LANES);
        }
    free(sums);
}

int conv1_direct_blocks_usable(int H, int W, int F, int k, int pad)
{
    return k == 3 && !pad && H >= 3 && W >= 3 && F % LANES == 0 && kernels();
}

void conv1_direct_blocks_sample(const float *x, const float *w, const float *b, float *h, int H, int W, int F)
{
    kernels()->blocks_sample(x, w, b, h, H, W, F);
}

size_t conv1_direct_wgrad_part_size(int F) { return (size_t)F * SUMS; }

void conv1_direct_wgrad_blocks_sample(const float *x, const float *dxb, const float *h, float *part, int H, int W,
                                      int F)
{
    kernels()->wgrad_blocks_sample(x, dxb, h, part, H, W, F);
}

void conv1_direct_wgrad_blocks_finish(const float *sums, int parts, float *dw, float *db, int F)
{
    for (int p = 0; p < parts; p++)
        for (int f = 0; f < F; f++) {
            const float *s = sums + p * conv1_direct_wgrad_part_size(F) + (size_t)f / LANES * SUMS * LANES + f % LANES;
            for (int t = 0; t < TAPS; t++)
                dw[f * TAPS + t] += s[t * LANES];
            db[f] += s[TAPS * LANES];
        }
}
