/* The plain collectives of MPI_COMM_WORLD that the layers above comm/ need, so that MPI is called in comm/
 * alone (and where errors.c aborts). Also the one way comm/ waits for a collective: within a deadline, after
 * which the ranks that did not arrive are named and the job ends (69, stall.h). Every rank calls them. */
#ifndef MNIST_WORLD_H
#define MNIST_WORLD_H
#include <mpi.h>
#include <stddef.h>

/* The deadline of the collectives below (and of world_wait): from start-up --comm-timeout; the trainer narrows
 * it to --step-timeout where the ranks arrive as close together as in a step (evaluation, replica checks). */
void world_set_deadline(double seconds, const char *option);
double world_deadline(const char **option);
/* stall_wait_all (stall.h) with the deadline above; what NULL: the rank's phase (stall_phase) names the wait. */
void world_wait(MPI_Request *req, int n, const char *what);

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
/* The same on any communicator (a node's, a duplicate of the world's), within the deadline: */
void world_allgather_on(MPI_Comm comm, const void *mine, void *all, size_t bytes);
/* in: MPI_IN_PLACE for out in place. */
void world_allreduce_on(MPI_Comm comm, const void *in, void *out, int n, MPI_Datatype type, MPI_Op op);
void world_bcast_on(MPI_Comm comm, void *buf, int n, MPI_Datatype type, int root);
void world_barrier_on(MPI_Comm comm);
/* *dup: a duplicate of comm whose errors return to MPI_CHECK. */
void world_dup_on(MPI_Comm comm, MPI_Comm *dup);
int world_size(void);
/* Seconds on MPI's clock. */
double world_time(void);
#endif
