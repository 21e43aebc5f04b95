#include "preempt.h"

#include <mpi.h>
#include <signal.h>
#include <time.h>

#include "clock.h"
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

int preempt_agree(double *age)
{
    int sig = caught;
    /* Each rank measures on its own clock: monotonic clocks of different nodes are not comparable. */
    double v[2] = {sig, -1};
    if (sig)
        v[1] = clock_now() - ((double)caught_at.tv_sec + 1e-9 * (double)caught_at.tv_nsec);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    *age = v[1];
    return (int)v[0];
}

const char *preempt_name(int sig)
{
    return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
}
