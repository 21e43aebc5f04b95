/* Vectors of 16 floats in two AVX2 registers (v16_avx512.h's operations lane for lane: the same bits), for
 * x86-64 CPUs without AVX-512 (AMD Zen 2 and 3, Intel before Skylake-SP). */
#ifndef MNIST_V16_AVX2_H
#define MNIST_V16_AVX2_H
#include <immintrin.h>

#define V16_TARGET __attribute__((target("avx2,fma")))
#define V16_ISA    "AVX2"
/* Accumulator vectors per row of a product block: 16 registers hold 6 x 1 (12 halves) beside the operands. */
enum { V16_MAX_NV = 1, V16_REGS = 16 };

typedef struct {
    __m256 lo, hi;
} v16;

V16_TARGET static inline v16 v16_load(const float *p) { return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
V16_TARGET static inline void v16_store(float *p, v16 a)
{
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
}
V16_TARGET static inline v16 v16_set1(float x) { return (v16){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
V16_TARGET static inline v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
V16_TARGET static inline v16 v16_add(v16 a, v16 b)
{
    return (v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
V16_TARGET static inline v16 v16_sub(v16 a, v16 b)
{
    return (v16){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
V16_TARGET static inline v16 v16_mul(v16 a, v16 b)
{
    return (v16){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
V16_TARGET static inline v16 v16_fmadd(v16 a, v16 b, v16 c)
{
    return (v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
V16_TARGET static inline v16 v16_fnmadd(v16 a, v16 b, v16 c)
{
    return (v16){_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
V16_TARGET static inline v16 v16_gather(const float *p, int stride)
{
    float t[16];
    for (int i = 0; i < 16; i++)
        t[i] = p[(long)i * stride];
    return v16_load(t);
}
V16_TARGET static inline void v16_scatter(float *p, int stride, v16 a)
{
    float t[16];
    v16_store(t, a);
    for (int i = 0; i < 16; i++)
        p[(long)i * stride] = t[i];
}
V16_TARGET static inline v16 v16_relu(v16 a)
{
    return (v16){_mm256_max_ps(a.lo, _mm256_setzero_ps()), _mm256_max_ps(a.hi, _mm256_setzero_ps())};
}
V16_TARGET static inline v16 v16_where_positive(v16 h, v16 g)
{
    __m256 z = _mm256_setzero_ps();
    return (v16){_mm256_and_ps(_mm256_cmp_ps(h.lo, z, _CMP_GT_OQ), g.lo),
                 _mm256_and_ps(_mm256_cmp_ps(h.hi, z, _CMP_GT_OQ), g.hi)};
}
/* lanes below n (from 0 to 8) of a half */
V16_TARGET static inline __m256i v16_half_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
V16_TARGET static inline v16 v16_load_first(const float *p, int n)
{
    if (n >= 16) /* the usual case: no masks to make */
        return v16_load(p);
    return (v16){_mm256_maskload_ps(p, v16_half_mask(n)), _mm256_maskload_ps(p + 8, v16_half_mask(n - 8))};
}
V16_TARGET static inline void v16_store_first(float *p, int n, v16 a)
{
    if (n >= 16) {
        v16_store(p, a);
        return;
    }
    _mm256_maskstore_ps(p, v16_half_mask(n), a.lo);
    _mm256_maskstore_ps(p + 8, v16_half_mask(n - 8), a.hi);
}
#endif
