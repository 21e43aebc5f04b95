/* The finite-difference checks of the layer suites (check_layers, check_conv; the method is in
 * check_layers.c's header comment). */
#ifndef MNIST_LAYER_TESTUTIL_H
#define MNIST_LAYER_TESTUTIL_H
#include "../check_run.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/rng.h"

static inline float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static inline double dot(const float *r, const float *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)r[i] * y[i];
    return s;
}

typedef double (*loss_fn)(void *ctx);

/* Compares the analytic gradient g of f with respect to x at `coords` random coordinates (all of
 * them when coords == 0): |numeric - analytic| <= atol + rtol |numeric|. */
static inline void fd_check(const char *what, loss_fn f, void *ctx, float *x, const float *g, size_t n, int coords,
                            float h, double rtol, double atol, uint64_t key)
{
    size_t count = coords ? (size_t)coords : n;
    for (size_t t = 0; t < count; t++) {
        size_t i = coords ? rng_below(key, t, (uint32_t)n) : t;
        float x0 = x[i], xp = x0 + h, xm = x0 - h;
        x[i] = xp;
        double lp = f(ctx);
        x[i] = xm;
        double lm = f(ctx);
        x[i] = x0;
        double num = (lp - lm) / ((double)xp - (double)xm);
        ck_assert_msg(fabs(num - g[i]) <= atol + rtol * fabs(num), "%s[%zu]: analytic %.7g, numeric %.7g", what, i,
                      (double)g[i], num);
    }
}
#endif
