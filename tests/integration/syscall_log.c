/* An LD_PRELOAD shim for tests/integration/durability.sh: logs, in call order, the file-system calls whose
 * order makes a write durable, to the file named by $SYSCALL_LOG (appended, one line per call, from every
 * process that inherits the variable), each line starting with the caller's pid, after the call returns:
 *   PID open FD PATH      open, openat and their 64-bit and fortified forms; PATH as the caller gave it,
 *                         or DIR/PATH for a relative path under a directory fd it opened
 *   PID fsync FD PATH     fsync and fdatasync that succeeded; PATH: what the process opened as FD, "?"
 *   PID close FD PATH
 *   PID rename OLD NEW    rename, renameat and renameat2 that succeeded
 * Calls made inside the C library (fopen's open) are not seen; the writers checked use these calls
 * directly or through HDF5, which calls them through the dynamic linker. Not thread-safe beyond what
 * O_APPEND writes give: the writers checked run on one thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum { MAX_FD = 4096, PATH_MAX_LOG = 1024 };

static char *names[MAX_FD];
static int log_fd = -1;
static pid_t log_pid;

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

static void out(const char *fmt, ...)
{
    static int (*real_open)(const char *, int, ...);
    if (!real_open)
        real_open = REAL("open", int (*)(const char *, int, ...));
    if (log_pid != getpid()) { /* first call, or a forked child: its own descriptor on the log */
        const char *path = getenv("SYSCALL_LOG");
        log_fd = path ? real_open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
        log_pid = getpid();
    }
    if (log_fd < 0)
        return;
    char line[2 * PATH_MAX_LOG + 64];
    int n = snprintf(line, sizeof line, "%ld ", (long)log_pid);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!write(log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static const char *name_of(int fd) { return fd >= 0 && fd < MAX_FD && names[fd] ? names[fd] : "?"; }

static void opened(int dirfd, const char *path, int fd)
{
    if (fd < 0 || fd >= MAX_FD || fd == log_fd)
        return;
    char full[PATH_MAX_LOG];
    if (path[0] != '/' && dirfd >= 0 && dirfd < MAX_FD && names[dirfd])
        snprintf(full, sizeof full, "%s/%s", name_of(dirfd), path);
    else
        snprintf(full, sizeof full, "%s", path);
    free(names[fd]);
    names[fd] = strdup(full);
    out("open %d %s\n", fd, full);
}

/* The mode argument exists only with O_CREAT or O_TMPFILE. */
#define MODE_ARG(flags, mode)                  \
    do {                                       \
        if ((flags) & (O_CREAT | O_TMPFILE)) { \
            va_list ap;                        \
            va_start(ap, flags);               \
            mode = va_arg(ap, mode_t);         \
            va_end(ap);                        \
        }                                      \
    } while (0)

#define WRAP_OPEN(fn)                                                           \
    int fn(const char *path, int flags, ...)                                    \
    {                                                                           \
        mode_t mode = 0;                                                        \
        MODE_ARG(flags, mode);                                                  \
        int fd = REAL(#fn, int (*)(const char *, int, ...))(path, flags, mode); \
        opened(AT_FDCWD, path, fd);                                             \
        return fd;                                                              \
    }
#define WRAP_OPENAT(fn)                                                                     \
    int fn(int dirfd, const char *path, int flags, ...)                                     \
    {                                                                                       \
        mode_t mode = 0;                                                                    \
        MODE_ARG(flags, mode);                                                              \
        int fd = REAL(#fn, int (*)(int, const char *, int, ...))(dirfd, path, flags, mode); \
        opened(dirfd, path, fd);                                                            \
        return fd;                                                                          \
    }
WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)

/* _FORTIFY_SOURCE's forms (no mode: they are used without O_CREAT). */
#define WRAP_OPEN_2(fn)                                              \
    int fn(const char *path, int flags)                              \
    {                                                                \
        int fd = REAL(#fn, int (*)(const char *, int))(path, flags); \
        opened(AT_FDCWD, path, fd);                                  \
        return fd;                                                   \
    }
WRAP_OPEN_2(__open_2)
WRAP_OPEN_2(__open64_2)

int fsync(int fd)
{
    int rc = REAL("fsync", int (*)(int))(fd);
    if (rc == 0)
        out("fsync %d %s\n", fd, name_of(fd));
    return rc;
}

int fdatasync(int fd)
{
    int rc = REAL("fdatasync", int (*)(int))(fd);
    if (rc == 0)
        out("fsync %d %s\n", fd, name_of(fd));
    return rc;
}

int close(int fd)
{
    if (fd >= 0 && fd < MAX_FD && names[fd]) {
        out("close %d %s\n", fd, names[fd]);
        free(names[fd]);
        names[fd] = NULL;
    }
    return REAL("close", int (*)(int))(fd);
}

int rename(const char *from, const char *to)
{
    int rc = REAL("rename", int (*)(const char *, const char *))(from, to);
    if (rc == 0)
        out("rename %s %s\n", from, to);
    return rc;
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    int rc = REAL("renameat", int (*)(int, const char *, int, const char *))(fromfd, from, tofd, to);
    if (rc == 0)
        out("rename %s %s\n", from, to);
    return rc;
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
    int rc = REAL("renameat2", int (*)(int, const char *, int, const char *, unsigned))(fromfd, from, tofd, to, flags);
    if (rc == 0)
        out("rename %s %s\n", from, to);
    return rc;
}
