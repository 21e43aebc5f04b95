#include "nn/cpu/conv_cpu.h"

#include <stdlib.h>

#include "base/errors.h"
#include "nn/cpu/gemm.h"
#include "nn/layers.h"
#include "base/threads.h"

/* Floats of one sample's im2col block, which each thread keeps on its stack: conv1's is 9 x 676 (convnet's
 * 25 x 784). */
enum { COL_MAX = 32768 };

/* The last forward's input: a backward with x NULL (layers.h: kept) reads it again. */
static const float *kept_x;

static int takes(int N, int C, int H, int W, int k, int pad, int wide)
{
    return omp_get_max_threads() > 1 && N > 1 && (size_t)C * k * k * conv_plane(H, W, k, pad, wide) <= COL_MAX;
}

/* Sample n as layers.c's loop computes it with chunks of one (the same calls, the same bits). */
int cpu_conv_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C,
                     int H, int W, int F, int k, int pad, int wide)
{
    if (!takes(N, C, H, W, k, pad, wide))
        return 0;
    PARALLEL_FOR
    for (int n = 0; n < N; n++) {
        float col[COL_MAX];
        conv_forward_range(be, gemm_serial, x, w, b, y, N, C, H, W, F, k, pad, col, n, n + 1, 1, wide);
    }
    kept_x = x;
    return 1;
}

/* Each thread adds its samples' weight gradients into its own partial sum, in sample order; the partial
 * sums are added to dw in thread order: one result per thread count. */
int cpu_conv_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                      float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide)
{
    if (!takes(N, C, H, W, k, pad, wide))
        return 0;
    size_t P = conv_plane(H, W, k, pad, wide), nw = (size_t)F * C * k * k;
    int threads = omp_get_max_threads();
    const float *in = x ? x : kept_x;
    float *partial = xcalloc((size_t)threads * nw, sizeof *partial);
    be->sum_add(db, dy, F, N * P, N * P, 1);
#pragma omp parallel num_threads(threads)
    {
        float col[COL_MAX], *dwt = partial + (size_t)omp_get_thread_num() * nw;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++)
            conv_backward_range(be, gemm_serial, in, w, dy, dwt, dx, N, C, H, W, F, k, pad, col, n, n + 1, 1, wide);
    }
    for (int t = 0; t < threads; t++)
        for (size_t i = 0; i < nw; i++)
            dw[i] += partial[(size_t)t * nw + i];
    free(partial);
    return 1;
}
