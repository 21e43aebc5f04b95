/* Random inputs for the model and layer tests. */
#ifndef MNIST_MODEL_TESTUTIL_H
#define MNIST_MODEL_TESTUTIL_H
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
#endif
