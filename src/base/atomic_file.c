#include "base/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errors.h"
#include "base/sha256.h"

/* The seal: this text, NUL-padded to AF_SEAL_BYTES. */
static const char seal_magic[] = "mnist_ddp sealed file ";
enum { SEAL_VERSION = 1 };
static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* The signals whose default action ends the process: held while a temporary exists. A signal mask is per
 * thread, so Open MPI's and OpenMP's threads would still take a process-directed SIGTERM and end the process
 * mid-write; a handler is per process. It notes the signal, and release_signals restores the default and
 * raises it once the file is in place or removed. Signals that already have a handler (preempt.c's flag) or
 * are ignored keep it. */
static const int held[AF_HELD_SIGNALS] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
static volatile sig_atomic_t pending;

static void note_signal(int sig) { pending = sig; }

static void hold_signals(struct sigaction saved[AF_HELD_SIGNALS])
{
    struct sigaction note = {.sa_handler = note_signal, .sa_flags = SA_RESTART};
    sigemptyset(&note.sa_mask);
    for (int i = 0; i < AF_HELD_SIGNALS; i++)
        if (sigaction(held[i], NULL, &saved[i]) == 0 && saved[i].sa_handler == SIG_DFL)
            sigaction(held[i], &note, NULL);
}

static void release_signals(const struct sigaction saved[AF_HELD_SIGNALS])
{
    for (int i = 0; i < AF_HELD_SIGNALS; i++)
        sigaction(held[i], &saved[i], NULL);
    int sig = pending;
    pending = 0;
    if (sig)
        raise(sig);
}

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "localhost");
    buf[len - 1] = 0;
}

/* dir (".", or path up to its last '/') and the base name of path. */
static void split_path(const char *path, char *dir, size_t len, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash)
        snprintf(dir, len, ".");
    else
        snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

int af_open(atomic_file *a, const char *path)
{
    char dir[AF_PATH_LEN], host[256];
    const char *base;
    if (strlen(path) >= sizeof a->path)
        return ENAMETOOLONG;
    snprintf(a->path, sizeof a->path, "%s", path);
    split_path(path, dir, sizeof dir, &base);
    host_name(host, sizeof host);
    hold_signals(a->saved);
    /* Another file under our name (a dead process with our pid, or planted) is left alone: next n. */
    errno = ENAMETOOLONG;
    for (int n = 0; n < 100; n++) {
        if (snprintf(a->tmp, sizeof a->tmp, "%s/.%s.%ld.%d@%s.tmp", dir, base, (long)getpid(), n, host) >=
            (int)sizeof a->tmp)
            break;
        a->fd = open(a->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (a->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    int err = errno;
    a->tmp[0] = 0;
    release_signals(a->saved);
    return err;
}

static void format_seal(char out[AF_SEAL_BYTES], int version, const char *hex, unsigned long long bytes)
{
    memset(out, 0, AF_SEAL_BYTES);
    snprintf(out, AF_SEAL_BYTES, "%s%d\nsha256 %s\nbytes %llu\n", seal_magic, version, hex, bytes);
}

int af_write_all(int fd, const void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        if (n < 0 && errno != EINTR)
            return errno;
        if (n == 0)
            return EIO;
        done += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

int af_write_sealed(atomic_file *a, const void *image, size_t len)
{
    char hex[SHA256_HEX_LEN + 1], seal[AF_SEAL_BYTES];
    sha256_hex(image, len, hex);
    format_seal(seal, SEAL_VERSION, hex, (unsigned long long)len);
    /* The temporary is new and empty: the seal lands at 0, the image right after it. */
    int err = af_write_all(a->fd, seal, sizeof seal);
    return err ? err : af_write_all(a->fd, image, len);
}

int af_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = fsync(fd) != 0 ? errno : 0;
    close(fd);
    return err;
}

int af_commit(atomic_file *a)
{
    int err = fsync(a->fd) != 0 ? errno : 0;
    if (!err && close(a->fd) != 0)
        err = errno;
    a->fd = -1;
    if (!err && rename(a->tmp, a->path) != 0)
        err = errno;
    if (err) {
        af_abort(a);
        return err;
    }
    a->tmp[0] = 0;
    char dir[AF_PATH_LEN];
    const char *base;
    split_path(a->path, dir, sizeof dir, &base);
    err = af_sync_dir(dir);
    release_signals(a->saved);
    return err;
}

void af_abort(atomic_file *a)
{
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
    if (a->tmp[0])
        unlink(a->tmp);
    a->tmp[0] = 0;
    release_signals(a->saved);
}

/* The writer's pid when name is one of our temporaries for a final name starting with prefix, made on
 * this host ("." prefix ... "." pid "." n "@" host ".tmp"); else 0. */
static long temp_owner(const char *name, const char *prefix, const char *host)
{
    char tail[300];
    size_t len = strlen(name), tl = (size_t)snprintf(tail, sizeof tail, "@%s.tmp", host);
    if (name[0] != '.' || strncmp(name + 1, prefix, strlen(prefix)) != 0 || len <= tl ||
        strcmp(name + len - tl, tail) != 0)
        return 0;
    const char *end = name + len - tl, *p = end;
    int dots = 0;
    while (p > name + 1 && dots < 2)
        dots += *--p == '.';
    long pid = 0;
    int n, used = 0;
    if (dots != 2 || sscanf(p, ".%ld.%d%n", &pid, &n, &used) != 2 || p + used != end)
        return 0;
    return pid > 0 ? pid : 0;
}

int af_remove_stale(const char *path_prefix)
{
    char host[256], path[AF_PATH_LEN], dir[AF_PATH_LEN];
    const char *prefix;
    split_path(path_prefix, dir, sizeof dir, &prefix);
    host_name(host, sizeof host);
    DIR *d = opendir(dir);
    int removed = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        long pid = temp_owner(e->d_name, prefix, host);
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && unlink(path) == 0) {
            warn("removed %s, left by process %ld of this host, which ended before finishing it", path, pid);
            removed++;
        }
    }
    if (d)
        closedir(d);
    return removed;
}

static ssize_t read_at_most(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : (ssize_t)got;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* The seal read from fd (head: its first bytes, got of them) against the rest of the file. */
static int check_seal(int fd, const char *head, ssize_t got, char *why, size_t len)
{
    int version = 0;
    char hex[SHA256_HEX_LEN + 1] = "", canon[AF_SEAL_BYTES], actual[SHA256_HEX_LEN + 1];
    unsigned long long bytes = 0;
    struct stat st;
    if (got < AF_SEAL_BYTES) {
        snprintf(why, len, "truncated: %zd bytes, shorter than its own %d-byte header", got, AF_SEAL_BYTES);
        return AF_BAD;
    }
    sscanf(head + strlen(seal_magic), "%d\nsha256 %64[0-9a-f]\nbytes %llu", &version, hex, &bytes);
    if (version != SEAL_VERSION) {
        snprintf(why, len, "sealed in format %d, this mnist_ddp reads format %d (damaged, or a newer version's)",
                 version, SEAL_VERSION);
        return AF_BAD;
    }
    /* Every byte of the header counts: only the canonical text of its own values is accepted. */
    format_seal(canon, version, hex, bytes);
    if (memcmp(canon, head, AF_SEAL_BYTES) != 0) {
        snprintf(why, len, "its mnist_ddp header is damaged");
        return AF_BAD;
    }
    if (fstat(fd, &st) != 0 || (unsigned long long)st.st_size != AF_SEAL_BYTES + bytes) {
        snprintf(why, len, "truncated or extended: %lld bytes, its header says %llu", (long long)st.st_size,
                 AF_SEAL_BYTES + bytes);
        return AF_BAD;
    }
    int err = sha256_fd_hex(fd, AF_SEAL_BYTES, actual, NULL);
    if (err) {
        snprintf(why, len, "cannot read it: %s", strerror(err));
        return AF_BAD;
    }
    if (strcmp(actual, hex) != 0) {
        snprintf(why, len,
                 "checksum mismatch: its header says SHA-256 %.12s..., its bytes hash to %.12s... "
                 "(damaged copy?)",
                 hex, actual);
        return AF_BAD;
    }
    return AF_SEALED;
}

int af_verify(const char *path, char *why, size_t len)
{
    char head[AF_SEAL_BYTES];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "%s", strerror(errno));
        return AF_BAD;
    }
    ssize_t got = read_at_most(fd, head, sizeof head);
    int rc = AF_BAD;
    if (got < 0)
        snprintf(why, len, "cannot read it: %s", strerror(errno));
    else if (got >= (ssize_t)sizeof hdf5_signature && memcmp(head, hdf5_signature, sizeof hdf5_signature) == 0)
        rc = AF_UNSEALED;
    else if (got >= (ssize_t)strlen(seal_magic) && memcmp(head, seal_magic, strlen(seal_magic)) == 0)
        rc = check_seal(fd, head, got, why, len);
    else
        snprintf(why, len, "not an HDF5 file (nor one sealed by mnist_ddp; damaged at its start?)");
    close(fd);
    return rc;
}
