/* Comparing a GPU kernel body (kernels.h) run in a plain loop with the CPU layers, bit for bit: destinations
 * start as an all-ones byte pattern (a NaN for floats, -1 for argmaxes), so an element a side forgets to
 * write, or writes out of range, shows up as a mismatch or a leftover sentinel. */
#ifndef MNIST_KERNEL_TESTUTIL_H
#define MNIST_KERNEL_TESTUTIL_H
#include "../check_run.h"
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels.h"

/* A buffer of `bytes` all-ones bytes. */
static inline void *sentinel(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    memset(p, 0xff, bytes);
    return p;
}

static inline int is_sentinel(const void *p, size_t size)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i++)
        if (b[i] != 0xff)
            return 0;
    return 1;
}

/* exp and got agree bit for bit over n elements of `size` bytes, and elements lo .. hi-1 were written. */
static inline void same(const char *what, const void *exp, const void *got, size_t n, size_t size, size_t lo, size_t hi)
{
    const char *e = exp, *g = got;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(!memcmp(e + i * size, g + i * size, size), "%s[%zu]: kernel differs from CPU", what, i);
        ck_assert_msg(i < lo || i >= hi || !is_sentinel(e + i * size, size), "%s[%zu]: never written", what, i);
    }
}

static inline void same_floats(const char *what, const float *exp, const float *got, size_t n)
{
    same(what, exp, got, n, sizeof(float), 0, n);
}

/* The sum of a reduction block's lanes in block_sum's tree (src/gpu/cuda/block_sum.h: part[t] += part[t + h] for t < h,
 * h = KERN_LANES/2 .. 1; the only GPU code of the reductions not shared through kernels.h). */
static inline double tree(double *lane)
{
    for (int h = KERN_LANES / 2; h > 0; h >>= 1)
        for (int t = 0; t < h; t++)
            lane[t] += lane[t + h];
    return lane[0];
}
#endif
