#include "comm/preempt.h"

#define _XOPEN_SOURCE 700 /* strptime, popen */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "comm/comm.h"
#include "base/errors.h"
#include "comm/world.h"

static volatile sig_atomic_t caught;
static struct timespec caught_at; /* written before caught is set, read only after */

static void on_signal(int sig)
{
    if (!caught) {
        clock_gettime(CLOCK_MONOTONIC, &caught_at); /* async-signal-safe */
        caught = sig;
    }
}

void preempt_raise(int sig) { on_signal(sig); }

void preempt_install(void)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGUSR1, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            die(EX_OSERR, "cannot install the handler of signal %d", sigs[i]);
}

static int all_digits(const char *s) { return s && *s && strspn(s, "0123456789") == strlen(s); }

/* EndTime=YYYY-MM-DDTHH:MM:SS (local time) of this job's own line of 'scontrol show job -o'; 0 when absent or
 * "Unknown". Asked for by the array's ID, scontrol lists every task of the array, and the task whose job ID is
 * the array's would take another task's end time (one long past, for a task that ran before it). So an array
 * task asks for ARRAY_TASK, and only the line that begins with its own JobId counts. */
static double scontrol_end_time(void)
{
    const char *job = getenv("SLURM_JOB_ID"), *array = getenv("SLURM_ARRAY_JOB_ID");
    const char *task = getenv("SLURM_ARRAY_TASK_ID");
    if (!all_digits(job))
        return 0;
    char cmd[160], own[48], line[4096];
    if (all_digits(array) && all_digits(task))
        snprintf(cmd, sizeof cmd, "scontrol show job -o %s_%s 2>/dev/null", array, task);
    else
        snprintf(cmd, sizeof cmd, "scontrol show job -o %s 2>/dev/null", job);
    snprintf(own, sizeof own, "JobId=%s ", job);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    double end = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, " EndTime=");
        struct tm tm = {.tm_isdst = -1};
        if (strncmp(line, own, strlen(own)) == 0 && p && strptime(p + 9, "%Y-%m-%dT%H:%M:%S", &tm))
            end = (double)mktime(&tm);
    }
    pclose(f);
    return end;
}

/* The end and where it came from (for the warning about one that is already past). */
static double find_job_end(const char **source)
{
    const char *names[] = {"MNIST_DDP_JOB_END", "SLURM_JOB_END_TIME"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v) {
            *source = names[i];
            return strtod(v, NULL);
        }
    }
    *source = "scontrol show job";
    return scontrol_end_time();
}

double preempt_job_end(void)
{
    double end = 0;
    if (world_rank() == 0) {
        const char *source;
        end = find_job_end(&source);
        double now = (double)time(NULL);
        /* A job cannot have started after its own end: stopping at once on such a value would only requeue
         * the job to stop again. */
        if (end > 0 && end <= now) {
            warn("the job's end time from %s is %.0f s in the past: ignored, no stop before the time limit", source,
                 now - end);
            end = 0;
        }
    }
    world_bcast(&end, sizeof end, 0);
    return end > 0 ? end : 0;
}

int preempt_agree(double *age, int time_up, double timeout_s, const char *option, long step)
{
    int sig = caught ? caught : time_up ? PREEMPT_TIME_LIMIT : 0;
    /* Each rank measures on its own clock: monotonic clocks of different nodes are not comparable. */
    double v[2] = {sig, -1};
    if (caught)
        v[1] = clock_now() - ((double)caught_at.tv_sec + 1e-9 * (double)caught_at.tv_nsec);
    double mine = v[1];
    comm_allreduce_within(v, 2, COMM_MAX, timeout_s, option, "stop agreement", step);
    *age = v[1];
    if (v[1] < 0)
        return (int)v[0]; /* no signal anywhere: the time limit, or nothing */
    /* The first signal names the stop, not the largest number: the rank whose signal is the oldest says which. */
    double first = mine == v[1] ? caught : 0;
    comm_allreduce_within(&first, 1, COMM_MAX, timeout_s, option, "stop agreement", step);
    return (int)first;
}

const char *preempt_name(int sig)
{
    return sig == PREEMPT_TIME_LIMIT      ? "the job's time limit"
           : sig == PREEMPT_LAUNCHER_GONE ? "the launcher's exit"
           : sig == SIGUSR1               ? "SIGUSR1"
           : sig == SIGTERM               ? "SIGTERM"
           : sig == SIGINT                ? "SIGINT"
                                          : "a signal";
}
