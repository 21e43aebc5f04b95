/* The failures of src/comm/comm_mpi.c that end the job (die() calls MPI_Abort, so they cannot run inside a
 * Check suite): one scenario per run, driven under mpirun by tests/comm-failures.sh.
 *   diverge R    rank R's parameters differ from rank 0's in one bit: comm_check_replicas stops every
 *                rank with 70, rank 0 naming rank R
 *   diverge-last R   the same in a model-sized buffer (net's 1,199,882 parameters), its last element:
 *                a check that covers only the first part of the parameters misses it
 *   stall S [R,..]  the last rank (or ranks R,..) sleeps instead of joining the gradient all-reduce of
 *                step 3: the others stop with 69 at the --comm-timeout deadline of S seconds, the lowest
 *                live rank naming the sleepers (stall.h)
 *   leave S [R]  the last rank (or R) leaves the training loop before step 3 for a barrier on the world, as a
 *                rank that finished early would wait in MPI_Finalize's: the same
 *   skip S R     rank R skips step 3 (its step count moves on), so it reaches the closing sum (deadline
 *                60 S) while the others wait in the gradient all-reduce of the last step: 69 at theirs,
 *                naming R as diverged
 *   kill S R     rank R is killed (SIGKILL) before step 3: the launcher ends the job, naming R
 *   mpierr W|L   an MPI call fails (a send to a rank that does not exist, on the world (W) or the
 *                node-local (L) communicator): MPI_CHECK stops the job with 70 and our one line naming the
 *                call, not Open MPI's banner (bootstrap sets MPI_ERRORS_RETURN on both)
 * A scenario that does not fail says so on stdout and exits 0. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "base/errors.h"

enum { N = 1000, STEPS = 5, MISSED_STEP = 3, MODEL_PARAMS = 1199882 };

static int rank, world;

static void fill(float *p)
{
    for (size_t i = 0; i < N; i++)
        p[i] = (float)i * 0.001f - 0.3f;
}

static void diverge(int odd_rank, size_t n, size_t at)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(i % N) * 0.001f - 0.3f;
    if (rank == odd_rank) {
        uint32_t u;
        memcpy(&u, &p[at], sizeof u);
        u ^= 1u; /* the last bit of the mantissa: the smallest possible difference */
        memcpy(&p[at], &u, sizeof u);
    }
    comm_check_replicas(p, n, "after step 7");
    free(p);
}

enum how { STALL, LEAVE, SKIP, KILL };

/* Whether this rank is in the list "R,R,..". */
static int listed(const char *ranks)
{
    for (const char *p = ranks; *p; p += strcspn(p, ","), p += *p == ',')
        if (atoi(p) == rank)
            return 1;
    return 0;
}

/* A few training steps through the trainer's table (comm_mpi: the bucketed all-reduce on a communicator of its
 * own), then a closing sum on the world; the odd ranks miss step MISSED_STEP as `how` says. */
static void stall(const ddp_env *env, double timeout_s, enum how how, const char *odd)
{
    float grads[N];
    comm_config cfg = {.timeout_s = timeout_s, .step_timeout_s = timeout_s, .bucket_bytes = 256 * sizeof(float)};
    void *g = comm_mpi.create(env, &cfg, grads, N);
    int step = 0;
    for (; step < STEPS; step++) {
        if (listed(odd) && step == MISSED_STEP) {
            if (how == LEAVE)
                break;
            if (how == SKIP)
                continue;
            if (how == KILL)
                raise(SIGKILL);
            sleep(120); /* far past the deadline and tests/integration/comm-failures.sh's time limit */
        }
        fill(grads);
        comm_mpi.arm(g, 1, step);
        for (size_t lo = N; lo > 0; lo -= 100) /* ten layers, back to front */
            comm_mpi.ready(g, lo - 100, 100);
        comm_mpi.finish(g);
    }
    comm_mpi.destroy(g);
    /* Not MPI_Finalize itself: while the others' MPI_Abort ended the job, Debian 12's mpirun then crashed (in
     * PMIx_server_finalize) or hung in 4 runs of 10 (tests/lib.sh: launcher_failed). */
    if (how == LEAVE && listed(odd)) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    double one = 1;
    /* A deadline far beyond the all-reduce's: a rank here answers the others' notice (stall_poll), not its own. */
    comm_allreduce_within(&one, 1, COMM_SUM, 60 * timeout_s, "--comm-timeout", "closing sum", step);
}

static void mpi_error(const ddp_env *env, const char *which)
{
    MPI_Comm comm = !strcmp(which, "L") ? env->local : MPI_COMM_WORLD;
    int size, x = 0;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    if (rank == 0)
        MPI_CHECK(MPI_Send(&x, 1, MPI_INT, size + 1, 0, comm));
}

int main(int argc, char **argv)
{
    ddp_env env;
    error_set_program("comm_fail");
    bootstrap_init(&argc, &argv, &env);
    rank = world_rank();
    world = env.world;
    const char *mode = argc == 3 || argc == 4 ? argv[1] : "";
    char last[16];
    snprintf(last, sizeof last, "%d", world - 1);
    const char *odd = argc == 4 ? argv[3] : last;
    static const char *const hows[] = {[STALL] = "stall", [LEAVE] = "leave", [SKIP] = "skip", [KILL] = "kill"};
    int how = -1;
    for (int i = 0; i < 4; i++)
        how = !strcmp(mode, hows[i]) ? i : how;
    if (!strcmp(mode, "diverge"))
        diverge(atoi(argv[2]), N, N / 2);
    else if (!strcmp(mode, "diverge-last"))
        diverge(atoi(argv[2]), MODEL_PARAMS, MODEL_PARAMS - 1);
    else if (how >= 0)
        stall(&env, atof(argv[2]), (enum how)how, odd);
    else if (!strcmp(mode, "mpierr"))
        mpi_error(&env, argv[2]);
    else
        die(EX_USAGE, "usage: comm_fail diverge RANK | diverge-last RANK | stall|leave|skip|kill SECONDS [RANK,..] | "
                      "mpierr W|L");
    if (rank == 0)
        printf("comm_fail %s: no failure\n", mode);
    bootstrap_finalize(&env);
    return 0;
}
