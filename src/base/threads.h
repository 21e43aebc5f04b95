/* Thread counts of the CPU math: OpenBLAS's own setter and OpenMP's, where the build has them (configure
 * checks for openblas_set_num_threads; another CBLAS is left to its environment variables). */
#ifndef MNIST_THREADS_H
#define MNIST_THREADS_H
#include "config.h"

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int);
#else
static inline void openblas_set_num_threads(int n) { (void)n; }
#endif

#ifdef _OPENMP
#include <omp.h>
/* Independent iterations shared among a rank's --threads in fixed ranges (the same split on every call);
 * PARALLEL_SIMD also vectorises each range. */
#define PARALLEL_FOR  _Pragma("omp parallel for schedule(static)")
#define PARALLEL_SIMD _Pragma("omp parallel for simd schedule(static)")
/* A loop of independent iterations, vectorised in the calling thread (without OpenMP: left to the compiler). */
#define SIMD          _Pragma("omp simd")
/* OpenBLAS's own threads for n OpenMP threads: none, gemm.c shares the GEMMs among the OpenMP ones. */
static inline int blas_threads(int n)
{
    (void)n;
    return 1;
}
#else
static inline void omp_set_num_threads(int n) { (void)n; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#define PARALLEL_FOR
#define PARALLEL_SIMD
#define SIMD
static inline int blas_threads(int n) { return n; }
#endif
#endif
