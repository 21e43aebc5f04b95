/* wino43's input gradient on every residue of its tiling: it takes planes of any side from 3 (partial tiles
 * of 4 x 4 at the right and bottom edges), but a run meets only net's conv2 (26, one residue). Sides 3 to 14
 * and a non-square plane, against the gradient's definition in double; the limits of the shapes it takes.
 * Built only where the kernels are. */
#include "../check_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/cpu/wino43.h"

enum { L = 16, C = 16, F = 32 };

/* Blocked index of [C/16][H][W][16]. */
static size_t at(int c, int i, int j, int H, int W) { return (((size_t)(c / L) * H + i) * W + j) * L + c % L; }

/* dx[c][i][j] = sum over f, a, b of dy[f][i - a][j - b] w[f][c][a][b], where dy exists. */
static double reference(const float *dy, const float *w, int c, int i, int j, int H, int W)
{
    int OH = H - 2, OW = W - 2;
    double s = 0;
    for (int f = 0; f < F; f++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                if (i - a >= 0 && i - a < OH && j - b >= 0 && j - b < OW)
                    s += (double)dy[at(f, i - a, j - b, OH, OW)] * w[((size_t)f * C + c) * 9 + a * 3 + b];
    return s;
}

static void check_plane(int H, int W)
{
    int OH = H - 2, OW = W - 2;
    float *w = malloc((size_t)F * C * 9 * sizeof *w), *dy = malloc((size_t)F * OH * OW * sizeof *dy);
    float *U = malloc(wino43_weights_size(C, F) * sizeof *U), *dx = malloc((size_t)C * H * W * sizeof *dx);
    srand(7 + H * 31 + W);
    for (size_t i = 0; i < (size_t)F * C * 9; i++)
        w[i] = (float)rand() / RAND_MAX - 0.5f;
    for (size_t i = 0; i < (size_t)F * OH * OW; i++)
        dy[i] = (float)rand() / RAND_MAX - 0.5f;
    ck_assert_msg(wino43_backward_usable(C, F, H, W, 3, 0), "%d x %d: not taken", H, W);
    wino43_weights_backward(w, F, C, U);
    wino43_backward_data(dy, U, dx, 1, C, H, W, F);
    for (int c = 0; c < C; c++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) {
                double want = reference(dy, w, c, i, j, H, W), got = dx[at(c, i, j, H, W)];
                /* Winograd's rounding on sums of up to 288 products of values below 0.5: 1e-4 (check_conv). */
                ck_assert_msg(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "%d x %d: dx[%d][%d][%d] %g, want %g", H, W,
                              c, i, j, got, want);
            }
    free(w), free(dy), free(U), free(dx);
}

START_TEST(test_backward_data_every_residue)
{
    if (!wino43_has_cpu()) {
        printf("check_wino43_edges: no AVX-512 or AVX2 here: wino43 does not run\n");
        return;
    }
    for (int s = 3; s <= 14; s++) /* (s - 2) mod 4 and s mod 4: every residue, twice over, and the smallest */
        check_plane(s, s);
    check_plane(13, 7); /* sides of two residues */
    printf("check_wino43_edges: %s input gradient on planes 3..14 and 13 x 7 matches its definition\n", wino43_isa());
}
END_TEST

/* The conditions under which conv takes wino43 (forward, then input gradient), each limit one step either
 * side: a wrong one sends a shape the kernels cannot hold to them, or keeps a shape they can from them. */
START_TEST(test_usable_limits)
{
    if (!wino43_has_cpu()) {
        printf("check_wino43_edges: no AVX-512 or AVX2 here: wino43 is never usable\n");
        return;
    }
    static const struct {
        int C, F, H, W, k, pad, fwd, bwd;
    } cases[] = {
        {16, 32, 6, 6, 3, 0, 1, 1},   /* the smallest forward plane: one tile */
        {16, 32, 5, 6, 3, 0, 0, 1},   /* one row short of a tile */
        {16, 32, 6, 5, 3, 0, 0, 1},   /* one column short */
        {16, 32, 2, 2, 3, 0, 0, 0},   /* (H - 2) % 4 == 0, but no tile, and no output for the gradient */
        {16, 32, 2, 6, 3, 0, 0, 0},   /* ... the rows alone */
        {16, 32, 6, 2, 3, 0, 0, 0},   /* ... the columns alone */
        {16, 32, 3, 3, 3, 0, 0, 1},   /* the gradient's smallest */
        {16, 32, 3, 2, 3, 0, 0, 0},   /* ... and one column less */
        {16, 32, 7, 6, 3, 0, 0, 1},   /* forward: whole tiles only, 7 */
        {16, 32, 8, 6, 3, 0, 0, 1},   /* 8 */
        {16, 32, 6, 9, 3, 0, 0, 1},   /* 9 */
        {16, 32, 10, 10, 3, 0, 1, 1}, /* two tiles */
        {16, 32, 6, 6, 2, 0, 0, 0},   /* 3 x 3 kernels only */
        {16, 32, 6, 6, 4, 0, 0, 0},   /* ... */
        {16, 32, 6, 6, 3, 1, 0, 0},   /* unpadded only */
        {15, 32, 6, 6, 3, 0, 0, 0},   /* whole blocks of 16 channels, in */
        {17, 32, 6, 6, 3, 0, 0, 0},   /* ... */
        {16, 31, 6, 6, 3, 0, 0, 0},   /* ... and out */
        {16, 48, 6, 6, 3, 0, 1, 1},   /* three blocks out */
        {128, 128, 6, 6, 3, 0, 1, 1}, /* the most channels either way */
        {144, 128, 6, 6, 3, 0, 0, 0}, /* one block more in */
        {128, 144, 6, 6, 3, 0, 0, 0}, /* one block more out */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int C_ = cases[i].C, F_ = cases[i].F, H = cases[i].H, W = cases[i].W, k = cases[i].k, pad = cases[i].pad;
        ck_assert_msg(wino43_usable(C_, F_, H, W, k, pad) == cases[i].fwd, "forward C %d F %d %d x %d k %d pad %d: %s",
                      C_, F_, H, W, k, pad, cases[i].fwd ? "not taken" : "taken");
        ck_assert_msg(wino43_backward_usable(C_, F_, H, W, k, pad) == cases[i].bwd,
                      "input gradient C %d F %d %d x %d k %d pad %d: %s", C_, F_, H, W, k, pad,
                      cases[i].bwd ? "not taken" : "taken");
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wino43_edges");
    TCase *tc = tcase_create("backward_data");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_backward_data_every_residue);
    tcase_add_test(tc, test_usable_limits);
    suite_add_tcase(s, tc);
    return check_run(s);
}
