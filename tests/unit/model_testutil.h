/* Random inputs for the model and layer tests. */
#ifndef MNIST_MODEL_TESTUTIL_H
#define MNIST_MODEL_TESTUTIL_H
#include "../check_run.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "nn/model.h"
#include "nn/cpu/nn_cpu.h"
#include "base/rng.h"

/* n floats drawn U(lo, hi) from rng key `key` (malloc'd; at least one element). */
static inline float *random_floats(size_t n, uint64_t key, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * rng_uniform(key, i);
    return p;
}

/* A reproducible random batch: n images of random bytes, normalised as the trainer does, random labels,
 * and sample ids 1000, 1017, ... (they key the dropout masks). */
static inline void random_batch(uint64_t seed, int n, float *x, uint8_t *labels, uint64_t *ids)
{
    size_t pixels = (size_t)n * 784;
    uint8_t *img = malloc(pixels);
    for (size_t i = 0; i < pixels; i++)
        img[i] = (uint8_t)rng_below(rng_key(seed, 1), (uint64_t)i, 256);
    cpu_normalize(img, pixels, x);
    free(img);
    for (int i = 0; i < n; i++) {
        labels[i] = (uint8_t)rng_below(rng_key(seed, 2), (uint64_t)i, 10);
        ids[i] = 1000 + 17 * (uint64_t)i;
    }
}

/* net trained on one batch on backend be, against the CPU's own composition: the loss and every gradient
 * within rounding (be sums some of them in another order). */
static inline void same_training(const nn_backend *be, const char *what)
{
    enum { N = 9 };
    model *m[2] = {model_create_on(&nn_cpu, MODEL_NET, N), model_create_on(be, MODEL_NET, N)};
    float *x = malloc((size_t)N * 784 * sizeof *x);
    uint8_t labels[N];
    uint64_t ids[N];
    random_batch(80, N, x, labels, ids);
    double loss[2];
    for (int k = 0; k < 2; k++)
        loss[k] = model_forward_backward(m[k], x, labels, ids, N, 0x5eedULL, 1.0f / N);
    ck_assert_msg(fabs(loss[0] - loss[1]) <= 1e-5 * fabs(loss[0]), "%s: loss %.9g, the CPU %.9g", what, loss[1],
                  loss[0]);
    for (int t = 0; t < model_num_tensors(m[0]); t++) {
        const tensor_desc *d = model_tensor(m[0], t);
        const float *e = model_grads(m[0]) + d->offset, *g = model_grads(m[1]) + d->offset;
        float big = 0.0f, err = 0.0f;
        for (size_t i = 0; i < d->count; i++)
            big = fmaxf(big, fabsf(e[i])), err = fmaxf(err, fabsf(e[i] - g[i]));
        ck_assert_msg(big > 0.0f && err <= 1e-5f * big, "%s: %s's gradient off by %g of %g", what, d->name, (double)err,
                      (double)big);
    }
    model_free(m[0]), model_free(m[1]), free(x);
}

#endif
