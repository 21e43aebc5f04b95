#include "config.h"

#include "comm/bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/errors.h"
#include "base/threads.h"
#include "base/watchdog.h"
#include "comm/exit_watch.h"
#include "comm/stall.h"
#include "comm/world.h"

/* -1 when unset; dies on a value that is not a non-negative integer (a corrupted environment). */
static long env_long(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0)
        die(EX_CONFIG, "environment variable %s='%s' is not a non-negative integer", name, s);
    return v;
}

const char *bootstrap_env_rank_text(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *var = vars[i];
            return v;
        }
    }
    return NULL;
}

long bootstrap_env_rank(void)
{
    const char *var;
    return bootstrap_env_rank_text(&var) ? env_long(var) : -1;
}

#define PMI_HINT                                                                 \
    "launch with 'srun --mpi=pmix ./mnist_ddp' (see 'srun --mpi=list'), or use " \
    "'mpirun -np %ld ./mnist_ddp' inside the allocation"

/* Checks one launcher variable against MPI's value; a mismatch means ranks were wired up wrongly. */
static void expect(const char *var, long got, long want, const char *what)
{
    if (got >= 0 && got != want)
        die(EX_CONFIG,
            "%s=%ld but MPI says %s is %ld: the launcher and MPI disagree (mixed MPI installations, "
            "or mpirun run inside srun?); launch with 'srun --mpi=pmix ./mnist_ddp' or 'mpirun -np N ./mnist_ddp'",
            var, got, what, want);
}

static void cross_check(ddp_env *e)
{
    long ompi_size = env_long("OMPI_COMM_WORLD_SIZE");
    long slurm_ntasks = env_long("SLURM_NTASKS");
    int srun_step = getenv("SLURM_STEP_ID") != NULL && getenv("SLURM_PROCID") != NULL;

    if (ompi_size >= 0) {
        /* Started by Open MPI's launcher: its variables describe this job (Slurm's, if any, describe
         * mpirun's daemons, not the ranks). */
        e->launcher = "mpirun";
        expect("OMPI_COMM_WORLD_SIZE", ompi_size, e->world, "the world size");
        expect("OMPI_COMM_WORLD_RANK", env_long("OMPI_COMM_WORLD_RANK"), world_rank(), "this rank");
        expect("OMPI_COMM_WORLD_LOCAL_RANK", env_long("OMPI_COMM_WORLD_LOCAL_RANK"), e->local_rank, "the local rank");
    } else if (srun_step && slurm_ntasks >= 0) {
        e->launcher = "srun";
        if (e->world == 1 && slurm_ntasks > 1)
            die(EX_CONFIG, "Slurm started %ld tasks but MPI sees each as a world of 1 (no PMI wire-up): " PMI_HINT,
                slurm_ntasks, slurm_ntasks);
        expect("SLURM_NTASKS", slurm_ntasks, e->world, "the world size");
        expect("SLURM_PROCID", env_long("SLURM_PROCID"), world_rank(), "this rank");
        long localid = env_long("SLURM_LOCALID");
        if (localid >= 0 && localid != e->local_rank && world_rank() == 0)
            warn("SLURM_LOCALID=%ld differs from the node-local MPI rank %d; using MPI's (GPU choice follows it)",
                 localid, e->local_rank);
    } else {
        e->launcher = e->world == 1 ? "singleton" : "mpiexec";
    }
}

/* srun without PMI (--mpi=none, or a default MpiDefault=none): Open MPI aborts inside MPI_Init with an
 * opaque message, so the launch is diagnosed before MPI_Init, from the variables srun sets. */
static void check_pmi(void)
{
    long ntasks = env_long("SLURM_STEP_NUM_TASKS");
    if (!getenv("SLURM_STEP_ID") || ntasks <= 1 || getenv("PMIX_RANK") || getenv("PMI_RANK") || getenv("PMI_FD") ||
        getenv("OMPI_COMM_WORLD_SIZE"))
        return;
    if (env_long("SLURM_PROCID") == 0) /* one line for the job, not one per task */
        die(EX_CONFIG, "Slurm started %ld tasks without PMI wire-up: " PMI_HINT, ntasks, ntasks);
    exit(EX_CONFIG);
}

/* Open MPI's nonblocking all-reduce (libnbc) takes a binomial tree between 2 ranks: reduce to one rank,
 * then broadcast. Rabenseifner's reduce-scatter + allgather is about twice as fast there, as fast as the
 * blocking MPI_Allreduce (docs/performance.md#cpu-kernels-and-threads). It also needs only 2 log2(p) rounds
 * of progress where a ring needs 2(p - 1). A choice in the environment (mpirun --mca, OMPI_MCA_...) stands;
 * other MPI libraries ignore the variable. */
static void mpi_defaults(void) { setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0); /* 3: rabenseifner */ }

/* What MPI cannot wait for within a deadline of its own: the watchdog ends the process at the deadline. */
static void blocking_begin(const char *what)
{
    const char *option;
    double s = world_deadline(&option);
    char line[512], host[256] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(line, sizeof line,
             "mnist_ddp: error: %s did not complete within %s %g s: a peer rank is frozen or dead, or the launcher "
             "does not answer [pid %d on %s]",
             what, option, s, (int)getpid(), host);
    watchdog_arm(s, EX_UNAVAILABLE, line);
}

void bootstrap_init(int *argc, char ***argv, ddp_env *e)
{
    double t0 = clock_now();
    int provided;
    check_pmi();
    mpi_defaults();
    /* SERIALIZED: BLAS/OpenMP threads compute; the main thread calls MPI, and the all-reduce's progress
     * thread (progress.h) under a lock while the main thread makes no other MPI call. */
    blocking_begin("MPI start-up (MPI_Init)");
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
    watchdog_disarm();
    /* Failed MPI calls come back to MPI_CHECK (our one line and exit status), not Open MPI's abort banner. */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    memset(e, 0, sizeof *e);
    e->start_s = t0;
    e->mpi_thread = provided;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &e->world));
    blocking_begin("the node's communicator (MPI_Comm_split_type)");
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &e->local));
    watchdog_disarm();
    MPI_CHECK(MPI_Comm_set_errhandler(e->local, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(e->local, &e->local_rank));
    MPI_CHECK(MPI_Comm_size(e->local, &e->local_size));
    if (gethostname(e->host, sizeof e->host - 1) != 0)
        strcpy(e->host, "?");
    cross_check(e);

    /* Node count: one leader (local rank 0) per node. */
    int leader = e->local_rank == 0, min_local, max_local;
    world_allreduce_on(MPI_COMM_WORLD, &leader, &e->nodes, 1, MPI_INT, MPI_SUM);
    world_allreduce_on(MPI_COMM_WORLD, &e->local_size, &min_local, 1, MPI_INT, MPI_MIN);
    world_allreduce_on(MPI_COMM_WORLD, &e->local_size, &max_local, 1, MPI_INT, MPI_MAX);
    if (min_local != max_local && world_rank() == 0)
        warn("uneven ranks per node (%d to %d on %d nodes): with '--ntasks=N' Slurm may pack tasks unevenly; "
             "'--nodes=K --ntasks-per-node=M' gives every node M ranks (one per GPU), which GPU jobs need",
             min_local, max_local, e->nodes);
    const char *option;
    double timeout_s = world_deadline(&option);
    stall_init(e->host, timeout_s, option);
}

int bootstrap_threads(const ddp_env *e, int requested)
{
    (void)e;
    int threads = requested;
    if (threads <= 0) {
        long cpus = env_long("SLURM_CPUS_PER_TASK");
        threads = cpus > 0 ? (int)cpus : 1;
    }
    openblas_set_num_threads(blas_threads(threads));
    omp_set_num_threads(threads);
    return threads;
}

void bootstrap_report(const ddp_env *e, const char *device, int threads)
{
    enum { LINE = 320 };
    char line[LINE];
    snprintf(line, sizeof line, "%6d  %-24.24s %6d  %-36.36s %7d", world_rank(), e->host, e->local_rank, device,
             threads);
    char *all = world_rank() == 0 ? xmalloc((size_t)e->world * LINE) : NULL;
    world_gather(line, all, LINE);
    if (world_rank() == 0) {
        printf("mnist_ddp %s: %d rank%s on %d node%s (launched by %s)\n", PACKAGE_VERSION, e->world,
               e->world == 1 ? "" : "s", e->nodes, e->nodes == 1 ? "" : "s", e->launcher);
        printf("%6s  %-24s %6s  %-36s %7s\n", "rank", "host", "local", "device", "threads");
        for (int r = 0; r < e->world; r++)
            printf("%s\n", all + (size_t)r * LINE);
        fflush(stdout);
        free(all);
    }
}

void bootstrap_finalize(ddp_env *e)
{
    long step;
    stall_phase_now(&step);
    stall_phase("shutdown", step);
    world_barrier_on(MPI_COMM_WORLD); /* a peer frozen now is named here, not waited for in MPI_Finalize */
    stall_finalize();
    MPI_Comm_free(&e->local);
    const char *option;
    double s = world_deadline(&option);
    char line[512];
    snprintf(line, sizeof line,
             "mnist_ddp: error: rank %d (%s, pid %d) stayed stopped for %s %g s while finishing (in or after "
             "MPI_Finalize, its peers gone): killed so that the job ends\n",
             world_rank(), e->host, (int)getpid(), option, s);
    exit_watch_start(s, line);
    blocking_begin("MPI_Finalize");
    MPI_Finalize();
    watchdog_disarm();
    stall_phase("finished", step); /* MNIST_DDP_FREEZE's last point: past every peer's deadline */
}
