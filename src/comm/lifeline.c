#define _POSIX_C_SOURCE 200809L
#include "comm/lifeline.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/errors.h"
#include "comm/bootstrap.h"
#include "comm/preempt.h"

static pid_t launcher;
static int with_checkpoints;
static const char *rank_var; /* the rank a launcher set, as it wrote it */

/* The line and the exit, from this thread: MPI's calls belong to the main thread, which may be stuck. */
static void end_now(const char *why)
{
    char line[640], host[256] = "?";
    gethostname(host, sizeof host - 1);
    /* The launcher's rank variable, not world_rank(): MPI may be called from the main thread only. */
    snprintf(line, sizeof line, "mnist_ddp: error: the launcher (pid %d) is gone: %s [rank %s on %s, pid %d]\n",
             (int)launcher, why, rank_var ? rank_var : "?", host, (int)getpid());
    ssize_t w = write(STDERR_FILENO, line, strlen(line));
    (void)w;
    _exit(EX_UNAVAILABLE);
}

static void *watch(void *arg)
{
    (void)arg;
    while (getppid() == launcher)
        clock_sleep(LIFELINE_POLL_S);
    if (!with_checkpoints)
        end_now("stopping (no --checkpoint-dir to save the run in)");
    preempt_raise(PREEMPT_LAUNCHER_GONE);
    clock_sleep(LIFELINE_GRACE_S);
    char why[96];
    snprintf(why, sizeof why, "no checkpoint could be agreed within %g s: stopping without one", LIFELINE_GRACE_S);
    end_now(why);
    return NULL;
}

void lifeline_start(int checkpoints)
{
    const char *var;
    if (!(rank_var = bootstrap_env_rank_text(&var))) /* unchecked: bootstrap reports a bad one after MPI_Init */
        return;
    launcher = getppid();
    with_checkpoints = checkpoints;
    /* The launcher's pipes die with it, before the thread can notice: a line to them then must not kill the rank
     * before its checkpoint (a write fails instead). */
    signal(SIGPIPE, SIG_IGN);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, watch, NULL) != 0)
        warn("cannot start the thread that watches the launcher: a rank may outlive a killed launcher");
    pthread_attr_destroy(&a);
}
