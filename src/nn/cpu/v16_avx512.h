/* Vectors of 16 floats in one AVX-512 register, for the kernels written once over v16 (wino43_kernels.h);
 * v16_avx2.h is the same vector in two AVX2 registers, lane for lane the same arithmetic (the same bits). */
#ifndef MNIST_V16_AVX512_H
#define MNIST_V16_AVX512_H
#include <immintrin.h>

#define V16_TARGET __attribute__((target("avx512f,fma")))
#define V16_ISA    "AVX-512"
/* Accumulator vectors per row of a product block: 32 registers hold 6 x 4. */
enum { V16_MAX_NV = 4, V16_REGS = 32 };

typedef __m512 v16;

V16_TARGET static inline v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
V16_TARGET static inline void v16_store(float *p, v16 a) { _mm512_storeu_ps(p, a); }
V16_TARGET static inline v16 v16_set1(float x) { return _mm512_set1_ps(x); }
V16_TARGET static inline v16 v16_zero(void) { return _mm512_setzero_ps(); }
V16_TARGET static inline v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
V16_TARGET static inline v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
V16_TARGET static inline v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
/* a b + c and c - a b, each rounded once */
V16_TARGET static inline v16 v16_fmadd(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
V16_TARGET static inline v16 v16_fnmadd(v16 a, v16 b, v16 c) { return _mm512_fnmadd_ps(a, b, c); }
/* lane i = p[i * stride] */
V16_TARGET static inline v16 v16_gather(const float *p, int stride)
{
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(stride));
    return _mm512_i32gather_ps(idx, p, 4);
}
/* p[i * stride] = lane i */
V16_TARGET static inline void v16_scatter(float *p, int stride, v16 a)
{
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32(stride));
    _mm512_i32scatter_ps(p, idx, a, 4);
}
/* max(a, 0) */
V16_TARGET static inline v16 v16_relu(v16 a) { return _mm512_max_ps(a, _mm512_setzero_ps()); }
/* g where h > 0, else +0 (op_relu_grad) */
V16_TARGET static inline v16 v16_where_positive(v16 h, v16 g)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(h, _mm512_setzero_ps(), _CMP_GT_OQ), g);
}
/* the first n lanes from p (n from 0 to 16), zeros above: nothing past them is read */
V16_TARGET static inline v16 v16_load_first(const float *p, int n)
{
    return _mm512_maskz_loadu_ps(n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1), p);
}
/* the first n lanes of a to p: nothing past them is written */
V16_TARGET static inline void v16_store_first(float *p, int n, v16 a)
{
    _mm512_mask_storeu_ps(p, n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1), a);
}
#endif
