/* The failures of src/comm/comm_mpi.c that end the job (die() calls MPI_Abort, so they cannot run inside a
 * Check suite): one scenario per run, driven under mpirun by tests/comm-failures.sh.
 *   diverge R    rank R's parameters differ from rank 0's in one bit: comm_check_replicas stops every
 *                rank with 70, rank 0 naming rank R
 *   diverge-last R   the same in a model-sized buffer (net's 1,199,882 parameters), its last element:
 *                a check that covers only the first part of the parameters misses it
 *   stall S      the last rank sleeps instead of joining the gradient all-reduce of step 3: the others
 *                stop with 69 at the --comm-timeout deadline of S seconds
 *   leave S      the last rank leaves the training loop before step 3 and finalises: the same
 *   mpierr W|L   an MPI call fails (a send to a rank that does not exist, on the world (W) or the
 *                node-local (L) communicator): MPI_CHECK stops the job with 70 and our one line naming the
 *                call, not Open MPI's banner (bootstrap sets MPI_ERRORS_RETURN on both)
 * A scenario that does not fail says so on stdout and exits 0. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
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
    comm_check_replicas(MPI_COMM_WORLD, p, n, "after step 7");
    free(p);
}

/* A few training steps through the bucketed all-reduce; the last rank misses step MISSED_STEP. */
static void stall(double timeout_s, int leave)
{
    float grads[N];
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, N, 256 * sizeof(float), timeout_s);
    for (int step = 0; step < STEPS; step++) {
        if (rank == world - 1 && step == MISSED_STEP) {
            if (leave)
                break;
            sleep(120); /* far past the deadline and tests/integration/comm-failures.sh's time limit */
        }
        fill(grads);
        grad_comm_arm(g, 1, step);
        for (size_t lo = N; lo > 0; lo -= 100) /* ten layers, back to front */
            grad_comm_ready(g, lo - 100, 100);
        grad_comm_finish(g);
    }
    grad_comm_free(g);
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
    const char *mode = argc == 3 ? argv[1] : "";
    if (!strcmp(mode, "diverge"))
        diverge(atoi(argv[2]), N, N / 2);
    else if (!strcmp(mode, "diverge-last"))
        diverge(atoi(argv[2]), MODEL_PARAMS, MODEL_PARAMS - 1);
    else if (!strcmp(mode, "stall") || !strcmp(mode, "leave"))
        stall(atof(argv[2]), !strcmp(mode, "leave"));
    else if (!strcmp(mode, "mpierr"))
        mpi_error(&env, argv[2]);
    else
        die(EX_USAGE, "usage: comm_fail diverge RANK | diverge-last RANK | stall SECONDS | leave SECONDS | mpierr W|L");
    if (rank == 0)
        printf("comm_fail %s: no failure\n", mode);
    bootstrap_finalize(&env);
    return 0;
}
