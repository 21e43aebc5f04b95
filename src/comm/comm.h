/* Collectives of the trainer.
 *
 * The table comm_backend is how train.c talks to them, whatever the device: comm_mpi (host buffers, MPI;
 * this file) or comm_nccl() (device buffers, NCCL; src/gpu/gpu.h), beside nn_backend
 * (backend.h) for the computation.
 *
 * The gradient all-reduce works in buckets (the rule of comm_plan.h). The model's backward calls
 * ready() as each layer's gradients become final (back to front), a bucket starts as soon as it holds
 * bucket_bytes, and only finish() waits, so communication overlaps the rest of backward. Sums, not
 * averages: the trainer scales gradients by 1/global batch beforehand, which keeps uneven last batches
 * exact. Every wait has a deadline (comm_wait_deadline: timeout_s until the first reduction, then the
 * shorter step_timeout_s): a dead or stalled peer ends the job (69). */
#ifndef MNIST_COMM_H
#define MNIST_COMM_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/bootstrap.h"
#include "comm/comm_plan.h"

typedef struct {
    const char *bootstrap_addr; /* NCCL's bootstrap HOST:PORT, NULL for its own choice (GPU only) */
    double timeout_s;           /* deadline of every wait at start-up (--comm-timeout) */
    double step_timeout_s;      /* of gradient all-reduce waits after the first (--step-timeout) */
    size_t bucket_bytes;        /* start a bucket once it holds this many bytes (0: every range at once) */
    int wire_bf16;              /* --grad-comm bf16: gradients exchanged as bfloat16 (half the bytes) */
    /* One rank arms, times and runs the all-reduce as with several (a sum over one rank: the identity in fp32),
     * so one GPU runs NCCL in the captured step and one CPU the bf16 rounding. A test and report setting. */
    int alone;
    long progress_us;      /* MPI across nodes: the progress thread's interval (progress.h), 0 for none */
    int shm;               /* one node, fp32: sum in shared memory (grad_shm.h) rather than through MPI */
    comm_proxy_spec proxy; /* the peers' traffic stood in for (comm_plan.h; bus_gbps 0: none); NCCL only */
} comm_config;

/* state: the backend's own, from create(); every other entry takes it. All entries are collective. */
typedef struct comm_backend {
    const char *name;
    void *(*create)(const ddp_env *env, const comm_config *cfg, float *grads, size_t n);
    /* Where the model's gradients must live from now on (zeroed), or NULL: where they are (grads above). */
    float *(*grads)(void *state);
    /* Only an armed pass reduces: gradient accumulation arms the last micro-batch only. */
    void (*arm)(void *state, int armed, long step);
    /* The model's hook (grad_ready_fn): gradients [offset, offset + count) are final. */
    void (*ready)(void *state, size_t offset, size_t count);
    /* The model's poll hook: moves the buckets in flight along (an MPI call inside a long backward pass, where
     * none is made otherwise); NULL: nothing to move (NCCL runs on its own). */
    void (*poll)(void *state);
    /* Starts what is left and waits for every bucket; the optimizer may then read the gradients. */
    void (*finish)(void *state);
    /* A launch of a captured step (CUDA graph) whose finish() ran inside the capture; NULL: no graphs. */
    void (*replayed)(void *state, long step);
    comm_stats (*stats)(const void *state);
    /* Rank 0's n floats at p to every rank; what names them in error messages. */
    void (*broadcast)(void *state, float *p, size_t n, const char *what);
    /* In-place average over ranks (BatchNorm running statistics). */
    void (*average)(void *state, float *p, size_t n, const char *what);
    void (*destroy)(void *state);
} comm_backend;

extern const comm_backend comm_mpi;

/* The MPI gradient all-reduce by itself (comm_mpi's state), on any communicator. */
typedef struct grad_comm grad_comm;
grad_comm *grad_comm_create(MPI_Comm comm, float *grads, size_t n, size_t bucket_bytes, double timeout_s);
/* Waits after the first reduction end at the shorter of this and timeout_s (default: timeout_s). */
void grad_comm_set_step_timeout(grad_comm *g, double step_timeout_s);
/* Exchange bfloat16 from now on: each rank's gradients rounded once (to nearest even), every addition inside
 * the all-reduce done in fp32 and rounded to bf16 (as NCCL's bf16 sum does), the result widened back to fp32
 * for the optimizer. Identical on every rank. Collective (the isolated reference time is measured again). */
void grad_comm_set_wire_bf16(grad_comm *g);
/* With one rank: arm and time the all-reduce anyway (comm_config's alone). Collective. */
void grad_comm_set_alone(grad_comm *g);
/* A thread tests the buckets in flight every interval_us during backward (progress.h); it needs MPI's
 * MPI_THREAD_SERIALIZED or more. Counts the reductions it saw complete before finish (comm_stats.early). */
void grad_comm_set_progress(grad_comm *g, long interval_us);
/* 1 when the progress thread found this step's buckets so far complete; makes no MPI call. */
int grad_comm_progressed(grad_comm *g);
void grad_comm_arm(grad_comm *g, int armed, long step);
void grad_comm_ready(void *ctx, size_t offset, size_t count);
void grad_comm_poll(void *ctx);
void grad_comm_finish(grad_comm *g);
comm_stats grad_comm_get_stats(const grad_comm *g);
void grad_comm_free(grad_comm *g);

/* Fingerprint of a float buffer's bits (FNV-1a over the 32-bit patterns): any change to one element
 * changes it, and it depends on the order of the elements too. */
uint64_t buffer_fingerprint(const float *p, size_t n);
/* The collectives of all ranks (MPI_COMM_WORLD) that train/ uses, so that it needs no MPI of its own. */
typedef enum { COMM_SUM, COMM_MIN, COMM_MAX } comm_op;
/* Every rank compares its fingerprint with rank 0's; a difference stops the job naming the ranks. */
void comm_check_replicas(const float *p, size_t n, const char *when);
/* In-place average over ranks (BatchNorm running statistics). */
void comm_average(float *p, size_t n);
/* In-place all-reduce of n doubles that stops the job (69) when it takes over timeout_s, naming option (the
 * deadline's), what and step in the message, and the rank that did not arrive when knowable. */
void comm_allreduce_within(double *v, int n, comm_op op, double timeout_s, const char *option, const char *what,
                           long step);
#endif
