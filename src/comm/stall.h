/* Who is where: a stalled job names its culprit, and a live job says what each rank is doing.
 *
 * At a missed deadline each live rank sends every other rank where it waits (collective, step, bucket) on a
 * communicator of its own, and collects the others' answers for at most STALL_WINDOW_S. A rank waiting in
 * another collective hears the notice and answers at once (stall_poll). The lowest rank that answered prints
 * one line: the ranks that did not answer (host, pid), and where the others were, grouped, so ranks that
 * diverged in their step count stand out. Then the job ends with 69.
 *
 * SIGUSR2 (scancel -s USR2, or kill) makes each rank print one line (rank, host, pid, step, phase and for how
 * long) without stopping training. */
#ifndef MNIST_STALL_H
#define MNIST_STALL_H
#include "base/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { STALL_WINDOW_S = 5 };

/* Collective (bootstrap_init calls it): the host and pid table, the communicator, the SIGUSR2 handler; its
 * waits end at timeout_s (option names it). */
void stall_init(const char *host, double timeout_s, const char *option);
void stall_finalize(void);
/* What this rank does now (a string that lives for the run: "training", "evaluation"), from step on.
 * MNIST_DDP_FREEZE=RANK:PHASE (tests): rank RANK stops itself (SIGSTOP) as it enters PHASE the first time,
 * saying so on stderr: "starting", "training", "stop agreement", "checkpoint write", "replica check",
 * "evaluation", "shutdown". */
void stall_phase(const char *phase, long step);
/* The phase now (and its step): what names a wait that has no name of its own (world_wait). */
const char *stall_phase_now(long *step);
/* A wait begins in the collective what; stall_wait_end() gives back the phase it interrupted. */
void stall_wait_begin(const char *what, long step);
void stall_wait_end(void);
/* Nonzero when a peer has announced a missed deadline: the caller joins with stall_die at once. */
int stall_poll(void);

/* Waits for req[0 .. n) within timeout_s, else ends the job naming the culprits (stall_die): what and step say
 * where ("gradient all-reduce", 12); bucketed: the requests are gradient buckets, the first open one is named.
 * The one way comm/ waits (world.h's collectives, the gradient buckets). */
#ifndef __CUDACC__ /* the CUDA units see no MPI */
void stall_wait_all(MPI_Request *req, int n, int bucketed, double timeout_s, const char *option, const char *what,
                    long step);
#endif

/* Where the calling rank waits, for stall_die. bucket < 0: not known (one wait for everything). */
typedef struct {
    const char *what;    /* the collective: "gradient all-reduce" */
    long step;           /* the step the caller is in */
    int bucket, buckets; /* the first bucket not complete, of how many */
    double waited_s;     /* how long this wait has run */
    double deadline_s;   /* its bound */
    const char *option;  /* the option that set the bound: "--step-timeout" */
} stall_wait;

/* The exchange above, then 69 with the one line, suffix (NULL or a hint: NCCL_DEBUG) after it. Every rank
 * calls it when its deadline passes or stall_poll says so. */
MNIST_NORETURN void stall_die_at(const char *file, int line, const stall_wait *w, const char *suffix);
#define stall_die(w, suffix) stall_die_at(__FILE__, __LINE__, (w), (suffix))

#ifdef __cplusplus
}
#endif
#endif
