#include "data/sampler.h"

#include "base/errors.h"
#include "base/rng.h"

static uint64_t global_batch(int world, int batch)
{
    if (world < 1 || batch < 1)
        die(EX_SOFTWARE, "sampler: world size %d and batch size %d must both be >= 1", world, batch);
    return (uint64_t)world * (uint64_t)batch;
}

uint64_t sampler_steps(uint64_t n, int world, int batch)
{
    uint64_t g = global_batch(world, batch);
    return n / g + (n % g != 0);
}

void sampler_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm)
{
    if (n > (UINT64_C(1) << 32))
        die(EX_SOFTWARE, "sampler: %llu samples exceed the 2^32 the permutation supports", (unsigned long long)n);
    uint64_t key = rng_key(seed, epoch);
    for (uint64_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint64_t i = n; i-- > 1;) {
        uint64_t bound = i + 1, j;
        if (bound <= UINT32_MAX)
            j = rng_below(key, i, (uint32_t)bound);
        else
            j = rng_u64(key, i) >> 32; /* bound == 2^32: the same multiply-shift */
        uint64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void sampler_slice(uint64_t n, int world, int batch, int rank, uint64_t step, uint64_t *first, uint64_t *count,
                   uint64_t *global_count)
{
    uint64_t g = global_batch(world, batch);
    uint64_t steps = n / g + (n % g != 0);
    if (rank < 0 || rank >= world)
        die(EX_SOFTWARE, "sampler: rank %d outside world of %d", rank, world);
    if (step >= steps)
        die(EX_SOFTWARE, "sampler: step %llu past the %llu steps of an epoch of %llu samples", (unsigned long long)step,
            (unsigned long long)steps, (unsigned long long)n);
    uint64_t start = step * g;
    uint64_t r_total = n - start < g ? n - start : g;
    uint64_t chunk = (r_total + (uint64_t)world - 1) / (uint64_t)world;
    uint64_t lo = (uint64_t)rank * chunk, hi = lo + chunk;
    if (lo > r_total)
        lo = r_total;
    if (hi > r_total)
        hi = r_total;
    *first = start + lo;
    *count = hi - lo;
    *global_count = r_total;
}
