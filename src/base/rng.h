/* Counter-based random numbers: every draw is a pure function of (key, counter). So shuffles
 * and dropout masks depend on (seed, epoch, global sample index, element), never on the rank,
 * the world size or the order in which ranks or GPU threads run. */
#ifndef MNIST_RNG_H
#define MNIST_RNG_H
#include <stdint.h>
#include "base/host_device.h"

/* SplitMix64 finaliser: a bijective 64-bit mix with good avalanche. */
static inline HD uint64_t rng_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Derive a sub-key: rng_key(rng_key(seed, epoch), sample) and so on. */
static inline HD uint64_t rng_key(uint64_t key, uint64_t id)
{
    return rng_mix(key ^ rng_mix(id + 0x632be59bd9b4e019ULL));
}

static inline HD uint64_t rng_u64(uint64_t key, uint64_t counter) { return rng_mix(rng_mix(key) ^ counter); }

/* Uniform float in [0, 1) with 24 random bits. */
static inline HD float rng_uniform(uint64_t key, uint64_t counter)
{
    return (float)(rng_u64(key, counter) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n) for n < 2^32 (multiply-shift, bias below 2^-32). */
static inline HD uint32_t rng_below(uint64_t key, uint64_t counter, uint32_t n)
{
    return (uint32_t)(((rng_u64(key, counter) >> 32) * (uint64_t)n) >> 32);
}
#endif
