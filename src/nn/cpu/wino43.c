#include "nn/cpu/wino43.h"

#include <string.h>

#include "base/threads.h"
#include "nn/cpu/cpu_isa.h"
#include "nn/cpu/wino43_kernels.h"

/* The kernels of the widest ISA that this CPU (and ONEDNN_MAX_CPU_ISA) allows, or NULL. */
static const wino43_kernels *kernels(void) { return cpu_isa_pick(&wino43_avx512, &wino43_avx2); }

int wino43_has_cpu(void) { return kernels() != NULL; }
const char *wino43_isa(void)
{
    const wino43_kernels *K = kernels();
    return K ? K->isa : "none";
}

int wino43_usable(int C, int F, int H, int W, int k, int pad)
{
    return k == 3 && !pad && C % LANES == 0 && C <= MAX_CB * LANES && F % LANES == 0 && F <= MAX_F &&
           (H - 2) % TILE == 0 && (W - 2) % TILE == 0 && H >= TIN && W >= TIN && wino43_has_cpu();
}

int wino43_backward_usable(int C, int F, int H, int W, int k, int pad)
{
    return k == 3 && !pad && C % LANES == 0 && C <= MAX_F && F % LANES == 0 && F <= MAX_CB * LANES && H >= 3 &&
           W >= 3 && wino43_has_cpu();
}

size_t wino43_weights_size(int C, int F) { return (size_t)E * C * F; }

void wino43_weights(const float *w, int F, int C, float *U) { kernels()->weights(w, F, C, U); }

/* The input gradient's: input channels the filters, output channels the channels, each kernel turned. */
void wino43_weights_backward(const float *w, int F, int C, float *U) { kernels()->weights_backward(w, F, C, U); }

void wino43_forward_sample(const float *x, const float *U, const float *b, float *y, int C, int H, int W, int F)
{
    kernels()->forward_sample(x, U, b, y, C, H, W, F);
}

/* The input gradient is the correlation of dy, padded by 2, with the turned kernels. */
void wino43_backward_data_sample(const float *dy, const float *U, float *dx, int C, int H, int W, int F)
{
    kernels()->backward_data_sample(dy, U, dx, C, H, W, F);
}

void wino43_forward(const float *x, const float *U, const float *b, float *y, int N, int C, int H, int W, int F)
{
    size_t xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        wino43_forward_sample(x + n * xs, U, b, y + n * ys, C, H, W, F);
}

void wino43_backward_data(const float *dy, const float *U, float *dx, int N, int C, int H, int W, int F)
{
    size_t xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int n = 0; n < N; n++)
        wino43_backward_data_sample(dy + n * ys, U, dx + n * xs, C, H, W, F);
}

/* The weight gradient: dw's 3 x 3 correlation of a 6 x 6 input tile with its 4 x 4 output gradient is
 * Winograd F(3x3, 4x4) over the same points: A3^T [(B^T x B) (*) (G4 dy G4^T)] A3. So the sums over tiles and
 * samples run in the transformed space (36 products [C x tiles] x [tiles x F]), and only their total is
 * transformed back. */
size_t wino43_wgrad_part_size(int C, int F) { return (size_t)E * (C * F + point_stride(C) + point_stride(F)) + F; }

/* A part: Mw [36][C][F], then a block's V and D, then db [F]. */
void wino43_wgrad_start(float *part, int C, int F) { memset(part, 0, wino43_wgrad_part_size(C, F) * sizeof(float)); }

void wino43_wgrad_sample(const float *x, const float *dy, float *part, int C, int H, int W, int F)
{
    kernels()->wgrad_sample(x, dy, part, C, H, W, F);
}

void wino43_wgrad_finish(float *ws, int parts, float *dw, float *db, int C, int F)
{
    size_t part = wino43_wgrad_part_size(C, F);
    /* the parts' sums in part order: the same bits for the same number of parts */
    for (int p = 1; p < parts; p++)
        for (size_t i = 0; i < (size_t)E * C * F; i++)
            ws[i] += ws[p * part + i];
    for (int p = 1; p < parts; p++)
        for (int f = 0; f < F; f++)
            ws[part - F + f] += ws[(p + 1) * part - F + f];
    kernels()->wgrad_output(ws, dw, C, F);
    memcpy(db, ws + part - F, (size_t)F * sizeof(float));
}

void wino43_backward_weights(const float *x, const float *dy, float *dw, float *db, float *ws, int parts, int N, int C,
                             int H, int W, int F)
{
    size_t part = wino43_wgrad_part_size(C, F), xs = (size_t)C * H * W, ys = (size_t)F * (H - 2) * (W - 2);
    PARALLEL_FOR
    for (int p = 0; p < parts; p++) {
        wino43_wgrad_start(ws + p * part, C, F);
        for (int n = wino43_part_first(N, parts, p); n < wino43_part_first(N, parts, p + 1); n++)
            wino43_wgrad_sample(x + n * xs, dy + n * ys, ws + p * part, C, H, W, F);
    }
    wino43_wgrad_finish(ws, parts, dw, db, C, F);
}
