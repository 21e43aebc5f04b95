/* Collectives of the trainer. The gradient all-reduce works in buckets: the model's backward calls
 * grad_comm_ready() as each layer's gradients become final (back to front), a bucket is started as
 * soon as it holds bucket_bytes, and only grad_comm_finish() waits, so communication overlaps the
 * rest of backward. Sums, not averages: the trainer scales gradients by 1/global batch beforehand,
 * which keeps uneven last batches exact. */
#ifndef MNIST_COMM_H
#define MNIST_COMM_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grad_comm grad_comm;

typedef struct {
    long reductions;       /* optimizer steps reduced */
    double exposed_s;      /* total time spent in grad_comm_finish (communication not hidden) */
    double blocking_s;     /* one blocking all-reduce of the whole gradient, measured at start */
    int buckets;           /* buckets per reduction */
} grad_comm_stats;

grad_comm *grad_comm_create(MPI_Comm comm, float *grads, size_t n, size_t bucket_bytes, double timeout_s);
/* Only an armed pass reduces: gradient accumulation arms the last micro-batch only. */
void grad_comm_arm(grad_comm *g, int armed, long step);
/* Model hook (grad_ready_fn): gradients [offset, offset+count) are final. */
void grad_comm_ready(void *ctx, size_t offset, size_t count);
/* Starts what is left and waits (with the deadline) for every bucket. */
void grad_comm_finish(grad_comm *g);
grad_comm_stats grad_comm_get_stats(const grad_comm *g);
void grad_comm_free(grad_comm *g);

/* Fingerprint of a float buffer's bits (FNV-1a over the 32-bit patterns): any change to one element
 * changes it, and it depends on the order of the elements too. */
uint64_t buffer_fingerprint(const float *p, size_t n);
/* Every rank compares its fingerprint with rank 0's; a difference stops the job naming the ranks. */
void comm_check_replicas(MPI_Comm comm, const float *p, size_t n, const char *when);
/* In-place average over ranks (BatchNorm running statistics). */
void comm_average(MPI_Comm comm, float *p, size_t n);
#endif
