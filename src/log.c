#include "log.h"

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"

static int log_rank, log_verbose;
static int updating_lines; /* progress lines replace each other: a user's terminal, without --verbose */
static int progress_open; /* a terminal's progress line is on screen without its newline */
static FILE *metrics_file;
static const char *metrics_name;

/* A full disk or a lost file system stops the run (74) at the first failed line, never passes silently. */
static _Noreturn void metrics_failed(void)
{
    die(EX_IOERR, "--metrics %s: write failed: %s", metrics_name, strerror(errno));
}

void log_use_terminal(int own_tty)
{
    /* Slurm logs and pipes get one line per report; only a person at a terminal sees one line update. */
    updating_lines = own_tty && !log_verbose && isatty(STDOUT_FILENO);
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

static void vsay(const char *fmt, va_list ap, int updating)
{
    if (log_rank != 0 && !log_verbose)
        return;
    if (log_verbose)
        printf("[rank %d] ", log_rank);
    else if (updating)
        fputs("\r", stdout);
    else if (progress_open)
        putchar('\n'); /* the last progress line stays on screen above this one */
    vprintf(fmt, ap);
    if (updating)
        fputs("\033[K", stdout); /* the rest of a longer line before it */
    else
        putchar('\n');
    progress_open = updating;
    fflush(stdout);
}

void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, 0);
    va_end(ap);
}

void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap, updating_lines);
    va_end(ap);
}

const char *log_duration(double s, char *buf, size_t size)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, size, "?");
        return buf;
    }
    long t = lround(s);
    if (t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
    return buf;
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
    if (progress_open) {
        putchar('\n');
        progress_open = 0;
    }
    FILE *f = metrics_file;
    metrics_file = NULL;
    if (f && fclose(f) != 0)
        metrics_failed();
}
