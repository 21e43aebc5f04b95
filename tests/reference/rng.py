"""NumPy port of src/base/rng.h (counter-based SplitMix64 draws) and of src/data/sampler.c's shuffle, written
independently from the C so the PyTorch references can regenerate the trainer's dropout masks and
epoch orders. All arithmetic is uint64 with wrap-around, on arrays."""
import numpy as np

def _u64(v):
    return np.asarray(v, dtype=np.uint64)


def mix(z):
    """SplitMix64 finaliser."""
    with np.errstate(over="ignore"):
        z = _u64(z) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def key(k, i):
    """rng_key(k, i) = mix(k ^ mix(i + 0x632be59bd9b4e019))."""
    with np.errstate(over="ignore"):
        return mix(_u64(k) ^ mix(_u64(i) + np.uint64(0x632BE59BD9B4E019)))


def u64(k, counter):
    return mix(mix(k) ^ _u64(counter))


def uniform(k, counter):
    """float32 in [0, 1) from the top 24 bits (exact in float32)."""
    return (u64(k, counter) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def below(k, counter, n):
    """Integer in [0, n) by multiply-shift of the top 32 bits."""
    with np.errstate(over="ignore"):
        return ((u64(k, counter) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32)


def dropout_keep(dropout_key, ids, layer, count, p):
    """Boolean mask [len(ids)][count]: element e of sample id kept iff
    uniform(key(key(dropout_key, id), layer), e) >= p."""
    e = np.arange(count, dtype=np.uint64)
    rows = [uniform(key(key(dropout_key, int(i)), layer), e) >= np.float32(p) for i in ids]
    return np.stack(rows)


def permutation(seed, epoch, n):
    """src/data/sampler.c's shuffle of range(n) for (seed, epoch): Fisher-Yates from the top, position i
    swapped with below(key(seed, epoch), i, i + 1). (For i + 1 == 2^32 the C takes the top 32 bits,
    which is what the multiply-shift gives too: no special case here.)"""
    i = np.arange(1, n, dtype=np.uint64)
    draws = below(key(seed, epoch), i, i + np.uint64(1)).tolist() if n > 1 else []
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = draws[i - 1]
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)
