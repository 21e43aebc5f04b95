/* Distributed sampling: which samples each rank trains on at each step.
 *
 * Like PyTorch's DistributedSampler, with stronger guarantees:
 *  - Epoch order. Each epoch uses one permutation of [0, n) that depends only on (seed, epoch),
 *    never on the world size, the batch size or the rank. It is a Fisher-Yates shuffle keyed by
 *    k = rng_key(seed, epoch) (src/base/rng.h):
 *        perm[i] = i for all i;
 *        for i = n-1 down to 1: j = rng_below(k, i, i+1); swap(perm[i], perm[j]);
 *    (for i+1 = 2^32, j = rng_u64(k, i) >> 32, the same multiply-shift formula).
 *  - Global batches. With G = world * batch, the permutation is cut into global batches:
 *    global batch s is positions [s*G, min((s+1)*G, n)). Every rank takes the same number of
 *    steps, sampler_steps() = ceil(n / G); nothing is dropped or padded.
 *  - Rank chunks. Rank r takes the r-th chunk of ceil(R / world) consecutive positions of its
 *    global batch of R samples (R = G except possibly at the last step, so full batches give
 *    every rank exactly `batch` samples). At a partial last batch some ranks get fewer samples,
 *    possibly 0, but still take the step (they contribute a zero gradient).
 *  - The ranks' position ranges in one step are disjoint, contiguous, in rank order, and their
 *    union is the global batch; over an epoch every sample is used exactly once. The trainer
 *    scales gradients by 1 / global_count and sums them over ranks, so the result of a step
 *    does not depend on how its global batch is split among ranks.
 */
#ifndef MNIST_SAMPLER_H
#define MNIST_SAMPLER_H
#include <stdint.h>

/* ceil(n / (world * batch)); 0 for n = 0. Dies EX_SOFTWARE for world < 1 or batch < 1. */
uint64_t sampler_steps(uint64_t n, int world, int batch);

/* The epoch order described above, into perm[n]. n <= 2^32 (dies EX_SOFTWARE otherwise). */
void sampler_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);

/* Positions [*first, *first + *count) of the epoch order belong to `rank` at `step`;
 * *global_count is the size of that global batch (world*batch except possibly at the last
 * step). Dies EX_SOFTWARE for a rank outside [0, world) or a step >= sampler_steps(). */
void sampler_slice(uint64_t n, int world, int batch, int rank, uint64_t step, uint64_t *first, uint64_t *count,
                   uint64_t *global_count);
#endif
