/* Whether each rank's threads fit the CPUs it may run on. A rank bound to one core (mpirun's default for two
 * ranks or fewer) with --threads 4, or a node with more threads than CPUs, trains several times slower
 * with nothing else to show why. Rank 0 names the first such rank and node, once, with the launcher's fix. */
#ifndef MNIST_CPU_FIT_H
#define MNIST_CPU_FIT_H
#include "comm/bootstrap.h"

/* Collective over the world: every rank calls it with its thread count. Warns, never stops the job (such a
 * run is slow, not wrong). */
void cpu_fit_check(const ddp_env *env, int threads);
#endif
