/* The widest vector instructions mnist_ddp's own CPU kernels use here (x86-64 builds): the CPU's, capped
 * the way oneDNN caps its own by ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA). So one setting gives the
 * trainer's kernels and oneDNN's (and a benchmark's PyTorch peer) the same ISA:
 * - a value from AVX2 on (AVX2, AVX2_VNNI) caps them at AVX2;
 * - a narrower one (SSE41, AVX) turns them off;
 * - any other (AVX512_*, ALL) leaves the CPU's. */
#ifndef MNIST_CPU_ISA_H
#define MNIST_CPU_ISA_H
#include <stddef.h>

typedef enum { CPU_ISA_NONE, CPU_ISA_AVX2, CPU_ISA_AVX512 } cpu_isa;

cpu_isa cpu_isa_own(void);
/* What a cap value allows (NULL: no cap); for tests. */
cpu_isa cpu_isa_cap(const char *value);
/* Of a kernel set built for AVX-512 and for AVX2, the one cpu_isa_own() allows; NULL: neither. */
static inline const void *cpu_isa_pick(const void *avx512, const void *avx2)
{
    cpu_isa isa = cpu_isa_own();
    return isa == CPU_ISA_AVX512 ? avx512 : isa == CPU_ISA_AVX2 ? avx2 : NULL;
}
#endif
