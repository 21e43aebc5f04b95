#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"

static int log_rank, log_verbose;
static FILE *metrics_file;
static const char *metrics_name;
static off_t metrics_whole; /* the file's length after its last complete line */

/* A full disk or a lost file system stops the run (74) at the first failed line, never passes silently; the
 * file keeps whole lines only (a reader never sees half a JSON object), where it can be truncated. */
static _Noreturn void metrics_failed(void)
{
    int err = errno;
    if (metrics_file)
        (void)!ftruncate(fileno(metrics_file), metrics_whole);
    die(EX_IOERR, "--metrics %s: write failed: %s", metrics_name, strerror(err));
}

void log_init(int rank, int verbose, const char *metrics_path)
{
    log_rank = rank;
    log_verbose = verbose;
    /* A write past RLIMIT_FSIZE (ulimit -f) fails with EFBIG, reported like a full disk, instead of a
     * SIGXFSZ that would end the process mid-write. */
    signal(SIGXFSZ, SIG_IGN);
    if (!metrics_path)
        return;
    metrics_name = metrics_path;
    /* A log, not a result: written in place as the run goes (not through a temporary and a rename), so a
     * killed job keeps what it reached and tail -f works. Mode 0666: the umask applies. */
    int err = 0, fd = -1;
    if (rank == 0 && ((fd = open(metrics_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0 ||
                      !(metrics_file = fdopen(fd, "w"))))
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
    metrics_whole = ftello(metrics_file);
}

void log_close(void)
{
    FILE *f = metrics_file;
    /* Durable at the end of the run like the other outputs; EINVAL: a pipe or device, nothing to sync. */
    if (f && fsync(fileno(f)) != 0 && errno != EINVAL)
        metrics_failed();
    metrics_file = NULL;
    if (f && fclose(f) != 0)
        metrics_failed();
}
