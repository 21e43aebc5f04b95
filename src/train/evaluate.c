#include "train/evaluate.h"

#include "base/errors.h"
#include "data/mnist.h"
#include "comm/world.h"

void evaluate_share(uint64_t n, int world, int rank, uint64_t *first, uint64_t *count)
{
    *first = n * (uint64_t)rank / (uint64_t)world;
    *count = n * (uint64_t)(rank + 1) / (uint64_t)world - *first;
}

eval_result evaluate(model *m, const uint8_t *images, const uint8_t *labels, size_t count, float *x)
{
    double loss = 0;
    long correct = 0, total = (long)count;
    size_t cap = (size_t)model_capacity(m);
    for (size_t i = 0; i < count; i += cap) {
        int n = (int)(count - i < cap ? count - i : cap);
        model_backend(m)->gather(images + i * MNIST_PIXELS, NULL, NULL, n, x, NULL);
        loss += model_evaluate(m, x, labels + i, n, &correct);
    }
    long counts[2] = {correct, total};
    world_sum_doubles(&loss, 1);
    world_sum_longs(counts, 2);
    eval_result r = {.correct = counts[0], .total = counts[1]};
    r.loss = r.total ? loss / (double)r.total : 0;
    r.accuracy = r.total ? (double)r.correct / (double)r.total : 0;
    return r;
}
