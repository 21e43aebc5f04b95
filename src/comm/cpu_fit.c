#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, CPU_OR */
#include "config.h"

#include "comm/cpu_fit.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "comm/world.h"

/* What each rank tells rank 0. A CPU count of 0 is unknown (an affinity mask wider than cpu_set_t). */
typedef struct {
    int threads, cpus; /* this rank's threads; the CPUs its affinity mask allows */
    int local_rank;
    int node_ranks, node_threads; /* on its node: the ranks, all their threads */
    int node_joined;              /* the CPUs in the union of the node's ranks' masks */
    int node_online;              /* the CPUs the node has online */
    char host[64];
} cpu_fit;

/* The node's side: its ranks' masks gathered and joined, their threads summed. */
static void node_fit(const ddp_env *e, const cpu_set_t *mine, cpu_fit *f)
{
    cpu_set_t *all = xmalloc((size_t)e->local_size * sizeof *all), joined;
    world_allgather_on(e->local, mine, all, sizeof *mine);
    int least;
    world_allreduce_on(e->local, &f->cpus, &least, 1, MPI_INT, MPI_MIN);
    world_allreduce_on(e->local, &f->threads, &f->node_threads, 1, MPI_INT, MPI_SUM);
    CPU_ZERO(&joined);
    for (int i = 0; i < e->local_size; i++)
        CPU_OR(&joined, &joined, &all[i]);
    f->node_joined = least > 0 ? CPU_COUNT(&joined) : 0;
    f->node_ranks = e->local_size;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    f->node_online = online > 0 && online < 1 << 30 ? (int)online : 0;
    free(all);
}

static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* How this launcher gives each rank t CPUs of its own. */
static const char *launcher_fix(const char *launcher, int t, char *buf, size_t n)
{
    if (strcmp(launcher, "srun") == 0)
        snprintf(buf, n,
                 "'srun --cpus-per-task=%d' gives each rank %d CPU%s (srun does not take it from sbatch since Slurm "
                 "22.05: export SRUN_CPUS_PER_TASK=%d)",
                 t, t, plural(t), t);
    else if (strcmp(launcher, "singleton") == 0)
        snprintf(buf, n, "the process's affinity (taskset, numactl, a batch system's cgroup) allows no more");
    else
        snprintf(buf, n,
                 "mpirun binds each rank to one core for 2 ranks or fewer, to a socket above: "
                 "'mpirun --map-by slot:PE=%d' gives each rank %d core%s of its own",
                 t, t, plural(t));
    return buf;
}

/* " (and N more alike)", or nothing. */
static const char *more(int n, const char *what, char *buf, size_t len)
{
    if (n > 0)
        snprintf(buf, len, " (%d more %s%s alike)", n, what, plural(n));
    else
        buf[0] = '\0';
    return buf;
}

enum { FULL, BOUND, SHARED, KINDS }; /* more threads than the node's CPUs; than a rank's mask; masks overlap */

static int kind_of(const cpu_fit *f)
{
    if (f->node_online > 0 && f->node_threads > f->node_online)
        return FULL;
    if (f->cpus > 0 && f->threads > f->cpus)
        return BOUND;
    if (f->node_joined > 0 && f->node_threads > f->node_joined)
        return SHARED;
    return KINDS;
}

static void warn_kind(const ddp_env *e, int kind, int r, const cpu_fit *f, int alike)
{
    char fix[256], also[64];
    int fits = f->node_online / f->node_ranks;
    if (kind == FULL)
        warn("%s runs %d threads (%d rank%s) on its %d CPUs%s: they take turns; --threads %d fits", f->host,
             f->node_threads, f->node_ranks, plural(f->node_ranks), f->node_online,
             more(alike, "node", also, sizeof also), fits > 0 ? fits : 1);
    else if (kind == BOUND)
        warn("--threads %d: rank %d on %s may run on %d CPU%s (its affinity mask), so its threads take turns%s; %s",
             f->threads, r, f->host, f->cpus, plural(f->cpus), more(alike, "rank", also, sizeof also),
             launcher_fix(e->launcher, f->threads, fix, sizeof fix));
    else
        warn("%s runs %d threads (%d rank%s) on %d of its %d CPUs, the ranks' affinity masks overlapping%s: they "
             "take turns; %s",
             f->host, f->node_threads, f->node_ranks, plural(f->node_ranks), f->node_joined, f->node_online,
             more(alike, "node", also, sizeof also), launcher_fix(e->launcher, f->threads, fix, sizeof fix));
}

/* Rank 0: one line for each kind of misfit, naming the first rank or node of that kind. */
static void report(const ddp_env *e, const cpu_fit *all)
{
    int first[KINDS], count[KINDS] = {0};
    for (int r = 0; r < e->world; r++) {
        int k = kind_of(&all[r]);
        if (k == KINDS || (k != BOUND && all[r].local_rank != 0)) /* node kinds: once per node */
            continue;
        if (count[k]++ == 0)
            first[k] = r;
    }
    for (int k = 0; k < KINDS; k++)
        if (count[k])
            warn_kind(e, k, first[k], &all[first[k]], count[k] - 1);
}

void cpu_fit_check(const ddp_env *e, int threads)
{
    cpu_set_t mine;
    CPU_ZERO(&mine);
    cpu_fit f = {.threads = threads, .local_rank = e->local_rank};
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        f.cpus = CPU_COUNT(&mine);
    snprintf(f.host, sizeof f.host, "%.63s", e->host);
    node_fit(e, &mine, &f);
    cpu_fit *all = world_rank() == 0 ? xmalloc((size_t)e->world * sizeof *all) : NULL;
    world_gather(&f, all, sizeof f);
    if (all)
        report(e, all);
    free(all);
}
