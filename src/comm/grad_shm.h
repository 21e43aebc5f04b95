/* The gradient all-reduce of ranks on one node, through shared memory: no MPI messages.
 *
 * Each rank's gradients live in a POSIX shared-memory segment (/dev/shm) that every rank of the node maps,
 * so the model writes them there directly (grad_shm_buffer). Buckets follow comm_plan.h's rule. Once every
 * rank has published a bucket (a stamp in its control page), rank r sums part r of it over the ranks, in rank
 * order, and writes the sum into every rank's copy. That is a reduce-scatter and an all-gather without a copy,
 * each element added once and the same bits everywhere. Parts are summed as soon as they can be, between layers
 * and between conv2's backward samples (the model's poll hook); finish() sums what is left and waits until
 * every rank has summed its parts. Then no rank reads another's gradients until the next armed pass, so the
 * next step may zero and rewrite them at once.
 *
 * With two ranks the sums are MPI's bit for bit (a + b is b + a). Waits have the deadlines of comm.h and name
 * a stalled rank (stall.h). */
#ifndef MNIST_GRAD_SHM_H
#define MNIST_GRAD_SHM_H
#include <mpi.h>
#include <stddef.h>

#include "comm/comm_plan.h"

typedef struct grad_shm grad_shm;

/* Collective over comm (ranks on one node). Returns NULL on every rank, after one warning from rank 0 that
 * says why, when a rank cannot create or map the segments (a full or missing /dev/shm). n floats per rank. */
grad_shm *grad_shm_create(MPI_Comm comm, size_t n, size_t bucket_bytes, double timeout_s, double step_timeout_s);
/* This rank's gradients in shared memory (zeroed): the model's from now on. */
float *grad_shm_buffer(grad_shm *g);
void grad_shm_arm(grad_shm *g, int armed, long step);
void grad_shm_ready(void *ctx, size_t offset, size_t count);
void grad_shm_poll(void *ctx);
void grad_shm_finish(grad_shm *g);
comm_stats grad_shm_get_stats(const grad_shm *g);
void grad_shm_free(grad_shm *g);
#endif
