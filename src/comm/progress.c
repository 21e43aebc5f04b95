#include "comm/progress.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/errors.h"

struct comm_progress {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    MPI_Request *req;
    const int *n;
    int watching, done, quit;
    long interval_us;
};

static void *progress_main(void *arg)
{
    comm_progress *p = arg;
    struct timespec pause = {p->interval_us / 1000000, p->interval_us % 1000000 * 1000};
    pthread_mutex_lock(&p->mu);
    while (!p->quit) {
        if (!p->watching || p->done) {
            pthread_cond_wait(&p->wake, &p->mu);
            continue;
        }
        MPI_CHECK(MPI_Testall(*p->n, p->req, &p->done, MPI_STATUSES_IGNORE));
        pthread_mutex_unlock(&p->mu);
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

comm_progress *progress_start(long interval_us)
{
    comm_progress *p = xcalloc(1, sizeof *p);
    p->interval_us = interval_us;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    /* Signals (preemption, the status line) stay the main thread's: the new thread inherits a full mask. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&p->thread, NULL, progress_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        die(EX_OSERR, "cannot start the all-reduce's progress thread: %s", strerror(err));
    return p;
}

void progress_lock(comm_progress *p) { pthread_mutex_lock(&p->mu); }
void progress_unlock(comm_progress *p) { pthread_mutex_unlock(&p->mu); }

void progress_watch(comm_progress *p, MPI_Request *req, const int *n)
{
    p->req = req;
    p->n = n;
    /* A request posted after a test found the others complete: the thread sleeps on wake since then. */
    p->done = 0;
    p->watching = 1;
    pthread_cond_signal(&p->wake);
}

int progress_done(const comm_progress *p) { return p->watching && p->done; }

int progress_idle(comm_progress *p)
{
    int done = progress_done(p);
    p->watching = p->done = 0;
    return done;
}

void progress_stop(comm_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
