#include "preempt.h"

#define _XOPEN_SOURCE 700 /* strptime, popen */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "comm.h"
#include "errors.h"

static volatile sig_atomic_t caught;
static struct timespec caught_at; /* written before caught is set, read only after */

static void on_signal(int sig)
{
    if (!caught) {
        clock_gettime(CLOCK_MONOTONIC, &caught_at); /* async-signal-safe */
        caught = sig;
    }
}

void preempt_install(void)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGUSR1, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            die(EX_OSERR, "cannot install the handler of signal %d", sigs[i]);
}

/* EndTime=2024-05-01T12:34:56 (local time) in scontrol's output; 0 when absent or "Unknown". */
static double scontrol_end_time(const char *job)
{
    char cmd[128], line[4096];
    snprintf(cmd, sizeof cmd, "scontrol show job -o %s 2>/dev/null", job);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    double end = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, " EndTime=");
        struct tm tm = {.tm_isdst = -1};
        if (p && strptime(p + 9, "%Y-%m-%dT%H:%M:%S", &tm))
            end = (double)mktime(&tm);
    }
    pclose(f);
    return end;
}

static double find_job_end(void)
{
    const char *v = getenv("MNIST_DDP_JOB_END");
    if (!v)
        v = getenv("SLURM_JOB_END_TIME");
    if (v)
        return strtod(v, NULL);
    const char *job = getenv("SLURM_JOB_ID");
    return job && strspn(job, "0123456789_") == strlen(job) ? scontrol_end_time(job) : 0;
}

double preempt_job_end(void)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    double end = rank == 0 ? find_job_end() : 0;
    MPI_CHECK(MPI_Bcast(&end, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return end > 0 ? end : 0;
}

int preempt_agree(double *age, int time_up, double timeout_s, const char *option, long step)
{
    int sig = caught ? caught : time_up ? PREEMPT_TIME_LIMIT : 0;
    /* Each rank measures on its own clock: monotonic clocks of different nodes are not comparable. */
    double v[2] = {sig, -1};
    if (caught)
        v[1] = clock_now() - ((double)caught_at.tv_sec + 1e-9 * (double)caught_at.tv_nsec);
    comm_allreduce_within(MPI_COMM_WORLD, v, 2, MPI_MAX, timeout_s, option, "stop agreement", step);
    *age = v[1];
    return (int)v[0];
}

const char *preempt_name(int sig)
{
    return sig == PREEMPT_TIME_LIMIT ? "the job's time limit" : sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}
