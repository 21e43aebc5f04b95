#include "log.h"

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"

static int log_rank, log_verbose;
static FILE *metrics_file;
static const char *metrics_name;

/* A full disk or a lost file system stops the run (74) at the first failed line, never passes silently. */
static _Noreturn void metrics_failed(void)
{
    die(EX_IOERR, "--metrics %s: write failed: %s", metrics_name, strerror(errno));
}

void log_init(int rank, int verbose, const char *metrics_path)
{
    log_rank = rank;
    log_verbose = verbose;
    if (!metrics_path)
        return;
    metrics_name = metrics_path;
    /* A log, not a result: written as the run goes, so a killed job keeps what it reached. */
    int err = 0;
    if (rank == 0 && !(metrics_file = fopen(metrics_path, "w")))
        err = errno;
    MPI_CHECK(MPI_Bcast(&err, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (err)
        die_all(EX_CANTCREAT, "--metrics %s: cannot create: %s", metrics_path, strerror(err));
}

void say(const char *fmt, ...)
{
    if (log_rank != 0 && !log_verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (log_verbose)
        printf("[rank %d] ", log_rank);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void metrics(const char *fmt, ...)
{
    if (!metrics_file)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(metrics_file, fmt, ap);
    va_end(ap);
    fputc('\n', metrics_file);
    if (fflush(metrics_file) != 0 || ferror(metrics_file))
        metrics_failed();
}

void log_close(void)
{
    FILE *f = metrics_file;
    metrics_file = NULL;
    if (f && fclose(f) != 0)
        metrics_failed();
}
