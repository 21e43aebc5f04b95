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
#else
static inline void omp_set_num_threads(int n) { (void)n; }
#endif
#endif
