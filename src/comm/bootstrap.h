/* Rank bootstrap: MPI decides rank and world; the node-local communicator decides the local rank
 * (and with it the GPU); launcher variables (Open MPI, Slurm) are cross-checked so a broken launch
 * stops with an explanation instead of training N independent copies. */
#ifndef MNIST_BOOTSTRAP_H
#define MNIST_BOOTSTRAP_H
#include <mpi.h>

typedef struct {
    int world; /* the rank: world_rank() (base/errors.h) */
    int local_rank, local_size;
    int nodes;      /* distinct hosts in the job */
    MPI_Comm local; /* ranks sharing this node's memory */
    char host[256];
    const char *launcher; /* "mpirun", "srun", "singleton" */
    double start_s;       /* clock_now() when the process began bootstrapping: start-up time counts from it */
    int mpi_thread;       /* the thread support MPI provides (MPI_THREAD_*) */
} ddp_env;

/* Before MPI_Init: the rank a launcher put in the environment (Open MPI's, PMIx's, PMI's or Slurm's, the first
 * set), or -1 where none did (a process started from a shell). */
long bootstrap_env_rank(void);
/* The same as the launcher wrote it, without a check (NULL where none is set); *var: the variable's name. */
const char *bootstrap_env_rank_text(const char **var);
void bootstrap_init(int *argc, char ***argv, ddp_env *env);
/* Threads per rank: --threads if given, else SLURM_CPUS_PER_TASK, else 1. Applies it to BLAS/OpenMP. */
int bootstrap_threads(const ddp_env *env, int requested);
/* Rank 0 prints one line per rank: rank, host, local rank, device, threads. */
void bootstrap_report(const ddp_env *env, const char *device, int threads);
void bootstrap_finalize(ddp_env *env);
#endif
