#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/errors.h"

static int log_verbose;
static int updating_lines;  /* progress lines replace each other: a user's terminal, without --verbose */
static int progress_open;   /* a terminal's progress line is on screen without its newline */
static int metrics_fd = -1; /* written with write(2): no stdio buffer left to flush half a line at exit */
static const char *metrics_name;
static off_t metrics_whole; /* the file's length after its last complete line */

/* A full disk or a lost file system stops the run (74) at the first failed line, never passes silently; the
 * file keeps whole lines only (a reader never sees half a JSON object), where it can be truncated. */
static _Noreturn void metrics_failed(int err)
{
    (void)!ftruncate(metrics_fd, metrics_whole);
    die(EX_IOERR, "--metrics %s: write failed: %s", metrics_name, strerror(err));
}

void log_use_terminal(int own_tty)
{
    /* Slurm logs and pipes get one line per report; only a person at a terminal sees one line update. */
    updating_lines = own_tty && !log_verbose && isatty(STDOUT_FILENO);
}

int log_init(int verbose, const char *metrics_path)
{
    log_verbose = verbose;
    /* A write past RLIMIT_FSIZE (ulimit -f) fails with EFBIG, reported like a full disk, instead of a
     * SIGXFSZ that would end the process mid-write. */
    signal(SIGXFSZ, SIG_IGN);
    if (!metrics_path)
        return 0;
    metrics_name = metrics_path;
    /* A log, not a result: written in place as the run goes (not through a temporary and a rename), so a
     * killed job keeps what it reached and tail -f works. Mode 0666: the umask applies. */
    if (world_rank() == 0 && (metrics_fd = open(metrics_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
        return errno;
    return 0;
}

static void vsay(const char *fmt, va_list ap, int updating)
{
    if (world_rank() != 0 && !log_verbose)
        return;
    if (log_verbose)
        printf("[rank %d] ", world_rank());
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
    if (metrics_fd < 0)
        return;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *line = xmalloc((size_t)n + 2);
    vsnprintf(line, (size_t)n + 1, fmt, again);
    va_end(again);
    line[n] = '\n';
    int err = af_write_all(metrics_fd, line, (size_t)n + 1);
    free(line);
    if (err)
        metrics_failed(err);
    metrics_whole += n + 1;
}

void log_close(void)
{
    if (progress_open) {
        putchar('\n');
        progress_open = 0;
    }
    int fd = metrics_fd;
    if (fd < 0)
        return;
    /* Durable at the end of the run like the other outputs; EINVAL: a pipe or device, nothing to sync. */
    if ((fsync(fd) != 0 && errno != EINVAL) || close(fd) != 0)
        metrics_failed(errno);
    metrics_fd = -1;
}
