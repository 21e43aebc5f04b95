#include "base/errors.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/watchdog.h"

static const char *program = "mnist_ddp";
static void (*exit_hook)(int code);
static int dying; /* die() is ending the process (or, in a harness, its hook took over) */

/* Asked by LeakSanitizer at exit in a --enable-sanitizers build (a no-op otherwise): after die(), what is
 * still allocated is the failed operation's state, released by exit() by design, not a leak. Normal exits
 * are still checked. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return dying; }

void error_set_program(const char *name) { program = name; }
void error_set_exit_hook(void (*hook)(int code)) { exit_hook = hook; }

static int mpi_running(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

/* "[rank R/W on HOST, file:line]": what a cluster user needs to find the failing process. */
static void print_line(const char *kind, const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024], where[512], host[256] = "?";
    vsnprintf(msg, sizeof msg, fmt, ap);
    gethostname(host, sizeof host - 1);
    if (mpi_running()) {
        int rank = 0, size = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        snprintf(where, sizeof where, "rank %d/%d on %s, %s:%d", rank, size, host, file, line);
    } else {
        snprintf(where, sizeof where, "%s, %s:%d", host, file, line);
    }
    fprintf(stderr, "%s: %s: %s [%s]\n", program, kind, msg, where);
    fflush(stderr);
}

/* Arms the watchdog for MPI's last call (what), after which the process ends with code all the same. */
static void bye(double seconds, int code, const char *what)
{
    char line[512], host[256] = "?";
    int rank = 0, size = 1;
    gethostname(host, sizeof host - 1);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(line, sizeof line,
             "%s: note: %s did not return within %g s (the launcher or a peer is unreachable): exiting with "
             "status %d [rank %d/%d on %s]",
             program, what, seconds, code, rank, size, host);
    watchdog_arm(seconds, code, line);
}

void die_at(const char *file, int line, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line("error", file, line, fmt, ap);
    va_end(ap);
    dying = 1;
    if (exit_hook)
        exit_hook(code);
    if (mpi_running()) {
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        /* MPI_Abort waits for the launcher, which a lost node's daemon may never answer: the process ends
         * anyway, so srun --kill-on-bad-exit or mpirun sees its status and no rank outlives the job. */
        bye(size > 1 ? ABORT_GRACE_S : FINALIZE_GRACE_S, code, size > 1 ? "MPI_Abort" : "MPI_Finalize");
        if (size > 1)
            MPI_Abort(MPI_COMM_WORLD, code);
        MPI_Finalize();
    }
    exit(code);
}

int world_rank(void)
{
    static int known = -1; /* kept after MPI_Finalize: the last words are still this rank's */
    if (known < 0 && mpi_running())
        MPI_Comm_rank(MPI_COMM_WORLD, &known);
    return known < 0 ? 0 : known;
}

void exit_all(int code)
{
    fflush(stdout);
    if (exit_hook)
        exit_hook(code);
    if (mpi_running()) {
        bye(FINALIZE_GRACE_S, code, "MPI_Finalize");
        MPI_Finalize();
    }
    exit(code);
}

void die_all_at(const char *file, int line, int code, const char *fmt, ...)
{
    if (world_rank() == 0) {
        va_list ap;
        va_start(ap, fmt);
        print_line("error", file, line, fmt, ap);
        va_end(ap);
    }
    dying = 1;
    exit_all(code);
}

void warn_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_line("warning", file, line, fmt, ap);
    va_end(ap);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die(EX_OSERR, "out of memory allocating %zu bytes", n);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        die(EX_OSERR, "out of memory allocating %zu bytes", n);
    return q;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die(EX_OSERR, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void *xmalloc_aligned(size_t n)
{
    void *p = NULL;
    enum { HUGE = 2u << 20 };
    size_t align = n >= 2 * HUGE ? HUGE : 64;
    if (posix_memalign(&p, align, n ? (n + 63) / 64 * 64 : 64) != 0)
        die(EX_OSERR, "out of memory allocating %zu bytes", n);
    if (align == HUGE)
        (void)madvise(p, n / HUGE * HUGE, MADV_HUGEPAGE);
    return p;
}
