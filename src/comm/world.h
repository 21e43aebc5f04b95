/* The plain collectives of MPI_COMM_WORLD that the layers above comm/ need, so that MPI is called in comm/
 * alone (and where errors.c aborts). Blocking, every rank calling: what needs a deadline goes through
 * comm.h's comm_allreduce_within. */
#ifndef MNIST_WORLD_H
#define MNIST_WORLD_H
#include <mpi.h>
#include <stddef.h>

/* Rank 0 decided: every rank's verdict (bytes) becomes rank 0's. The one way a job's ranks learn what rank 0
 * tried (a file opened, a checkpoint chosen) and stop together: each caller dies with die_all on a bad one. */
void world_verdict(void *verdict, size_t bytes);
/* root's bytes to every rank. */
void world_bcast(void *buf, size_t bytes, int root);
/* In place over every rank: sums, maxima, minima. */
void world_sum_doubles(double *v, int n);
void world_max_doubles(double *v, int n);
void world_sum_longs(long *v, int n);
void world_sum_ints(int *v, int n);
void world_min_ints(int *v, int n);
/* Each rank's `bytes` into all (rank order) on rank 0; all may be NULL elsewhere. */
void world_gather(const void *mine, void *all, size_t bytes);
/* Each rank's `bytes` into all (rank order) on every rank of comm (a node's communicator). */
void world_allgather_on(MPI_Comm comm, const void *mine, void *all, size_t bytes);
int world_size(void);
/* Seconds on MPI's clock. */
double world_time(void);
#endif
