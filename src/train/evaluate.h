/* Distributed evaluation: each rank scores its contiguous share of the test set, and the loss sum
 * and correct count are reduced, so every world size reports the same accuracy for the same weights. */
#ifndef MNIST_EVALUATE_H
#define MNIST_EVALUATE_H
#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"

typedef struct {
    double loss;     /* mean over the whole test set */
    double accuracy; /* fraction correct */
    long correct, total;
} eval_result;

/* The share of rank r of n samples: [*first, *first + *count). */
void evaluate_share(uint64_t n, int world, int rank, uint64_t *first, uint64_t *count);
/* images/labels: this rank's share (count samples); x: scratch of model_capacity(m) * MNIST_PIXELS floats; all
 * three in the memory of the model's backend. */
eval_result evaluate(model *m, const uint8_t *images, const uint8_t *labels, size_t count, float *x);
#endif
