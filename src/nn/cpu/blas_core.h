/* OpenBLAS picks its kernels once, while it loads, from the CPU's model number. A release older than the
 * CPU does not know the model and falls back to its Prescott (SSE3) kernels, several times slower on fc1's
 * GEMMs than the AVX-512 ones (docs/performance.md). OPENBLAS_CORETYPE overrides the choice, but only while
 * it loads. */
#ifndef MNIST_BLAS_CORE_H
#define MNIST_BLAS_CORE_H
#include "config.h"

#include <stddef.h>

/* The OPENBLAS_CORETYPE to ask for when OpenBLAS reports `core` on a CPU with these features, or NULL to
 * keep its choice: only its fallback for CPUs it does not know is replaced, never a core it chose. */
const char *blas_core_better(const char *core, int avx2_fma, int avx512);
/* First thing in main, before MPI_Init: when OPENBLAS_CORETYPE is unset and blas_core_better has a better
 * core, the process restarts itself (same pid, arguments and environment, plus OPENBLAS_CORETYPE). Where
 * it cannot, it warns on stderr and goes on with OpenBLAS's kernels. */
void blas_core_fix(char **argv);
/* "OpenBLAS kernels: SkylakeX" and, after a restart by blas_core_fix, why; "" for another CBLAS. */
void blas_core_describe(char *buf, size_t len);

#ifdef HAVE_OPENBLAS_GET_CORENAME
char *openblas_get_corename(void);
#else
static inline char *openblas_get_corename(void) { return NULL; } /* another CBLAS: nothing to fix */
#endif

#if defined(__x86_64__) || defined(__i386__)
/* The ISA of OpenBLAS's Haswell kernels, and of its SkylakeX ones. */
static inline int cpu_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
static inline int cpu_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
}
#else
static inline int cpu_avx2_fma(void) { return 0; }               /* OpenBLAS's detection is left alone off x86 */
static inline int cpu_avx512(void) { return 0; }
#endif
#endif
