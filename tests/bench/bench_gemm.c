/* fc1's three products (batch 64, 9216 -> 128) through gemm(), the own AVX-512 kernels against BLAS's
 * (--gemm auto and blas), one thread, rounds alternating; best of each round's calls:
 *   bench_gemm [ROUNDS [CALLS]]   defaults: 3 20
 * Prints ms per call and GFLOP/s for forward (B transposed), input gradient and weight gradient. */
#include <config.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/rng.h"
#include "base/threads.h"
#include "nn/cpu/blas_core.h"
#include "nn/cpu/gemm.h"

enum { N = 64, IN = 9216, OUT = 128 };

static float *filled(size_t count, uint64_t key)
{
    float *p = malloc(count * sizeof *p);
    for (size_t i = 0; i < count; i++)
        p[i] = rng_uniform(key, i) - 0.5f;
    return p;
}

/* The best of calls calls of product which (0 forward, 1 input gradient, 2 weight gradient), seconds. */
static double best_of(int which, int calls, const float *x, const float *w, const float *dy, float *y, float *dx,
                      float *dw)
{
    double best = 1e30;
    for (int i = 0; i < calls; i++) {
        double t = clock_now();
        if (which == 0)
            gemm(0, 1, N, OUT, IN, 1.0f, x, IN, w, IN, 1.0f, y, OUT);
        else if (which == 1)
            gemm(0, 0, N, IN, OUT, 1.0f, dy, OUT, w, IN, 0.0f, dx, IN);
        else
            gemm(1, 0, OUT, IN, N, 1.0f, dy, OUT, x, IN, 1.0f, dw, IN);
        t = clock_now() - t;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    blas_core_fix(argv); /* the kernels mnist_ddp runs */
    int rounds = argc > 1 ? atoi(argv[1]) : 3, calls = argc > 2 ? atoi(argv[2]) : 20;
    openblas_set_num_threads(1);
    omp_set_num_threads(1);
    float *x = filled((size_t)N * IN, 1), *w = filled((size_t)OUT * IN, 2), *dy = filled((size_t)N * OUT, 3);
    float *y = filled((size_t)N * OUT, 4), *dx = filled((size_t)N * IN, 5), *dw = filled((size_t)OUT * IN, 6);
    const char *names[] = {"forward", "input gradient", "weight gradient"};
    double flop = 2.0 * N * IN * OUT;
    gemm_use_own(1);
    printf("fc1's products, %d x %d x %d, one thread, best of %d calls; own kernels on this CPU: %s\n", N, OUT, IN,
           calls, gemm_own_active() ? "yes" : "no (both columns are BLAS)");
    for (int r = 0; r < rounds; r++)
        for (int which = 0; which < 3; which++) {
            gemm_use_own(0);
            double blas = best_of(which, calls, x, w, dy, y, dx, dw);
            gemm_use_own(1);
            double own = best_of(which, calls, x, w, dy, y, dx, dw);
            printf("round %d  %-16s BLAS %6.3f ms %6.1f GFLOP/s   own %6.3f ms %6.1f GFLOP/s   %.2fx\n", r + 1,
                   names[which], 1e3 * blas, flop / blas / 1e9, 1e3 * own, flop / own / 1e9, blas / own);
        }
    free(x), free(w), free(dy), free(y), free(dx), free(dw);
    return 0;
}
