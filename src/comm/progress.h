/* A thread that drives MPI's progress engine while gradient buckets are in flight.
 *
 * Open MPI moves a nonblocking all-reduce only inside MPI calls. Backward calls MPI at its layer boundaries
 * (grad_comm_ready), but conv2's backward, half of a CPU step, is one oneDNN call: a bucket posted before it
 * waits there, and finish() then does the exchange that could have gone on meanwhile. This thread tests the
 * requests every interval while the step's buckets are in flight, sleeping in between, so it takes a core
 * only for the moments MPI has something to move.
 *
 * MPI calls are serialised by the thread's lock (MPI_THREAD_SERIALIZED): the owner takes it around its own
 * calls on the watched requests, and the thread polls only between progress_watch() and progress_idle(),
 * while the owner makes no other MPI call. */
#ifndef MNIST_PROGRESS_H
#define MNIST_PROGRESS_H
#include <mpi.h>

typedef struct comm_progress comm_progress;

/* A thread, idle until progress_watch; interval_us between its tests. Dies (EX_OSERR) if none can start. */
comm_progress *progress_start(long interval_us);
void progress_lock(comm_progress *p);
void progress_unlock(comm_progress *p);
/* With the lock held: test req[0 .. *n) from now on (*n may grow under the lock). */
void progress_watch(comm_progress *p, MPI_Request *req, const int *n);
/* With the lock held: 1 when a test found every watched request complete (no MPI call). */
int progress_done(const comm_progress *p);
/* With the lock held: stop testing; returns progress_done(). */
int progress_idle(comm_progress *p);
/* Ends and joins the thread; NULL is a no-op. */
void progress_stop(comm_progress *p);
#endif
