#include "base/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int lock_fd = -1;

/* A clean exit says so: the file is emptied (the kernel drops the lock itself). Not removed: a process that
 * opened the old file just before would lock a name nobody else sees. */
static void release(void)
{
    if (lock_fd >= 0 && ftruncate(lock_fd, 0) == 0)
        fsync(lock_fd);
}

/* "host H pid P[ Slurm job J] since T" for this process. */
static void describe_self(char *buf, size_t len)
{
    char host[256] = "?", when[32] = "?";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    const char *array = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
    const char *job = getenv("SLURM_JOB_ID");
    char slurm[96] = "";
    if (array && task)
        snprintf(slurm, sizeof slurm, " Slurm job %s_%s", array, task);
    else if (job)
        snprintf(slurm, sizeof slurm, " Slurm job %s", job);
    snprintf(buf, len, "host %s pid %ld%s since %s", host, (long)getpid(), slurm, when);
}

/* The file's first line (its holder), or "". */
static void read_holder(int fd, char *holder, size_t len)
{
    ssize_t n = pread(fd, holder, len - 1, 0);
    holder[n > 0 ? n : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
}

int run_lock_take(const char *path, char *holder, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(holder, len, "%s", strerror(errno));
        return RUN_LOCK_NO_FILE;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) != 0) {
        int err = errno;
        if (err == EACCES || err == EAGAIN)
            read_holder(fd, holder, len);
        else
            snprintf(holder, len, "%s", strerror(err));
        close(fd);
        return err == EACCES || err == EAGAIN ? RUN_LOCK_HELD : RUN_LOCK_UNAVAILABLE;
    }
    read_holder(fd, holder, len);
    char self[512];
    describe_self(self, sizeof self);
    size_t n = strlen(self);
    self[n++] = '\n';
    if (ftruncate(fd, 0) != 0 || pwrite(fd, self, n, 0) != (ssize_t)n || fsync(fd) != 0) {
        snprintf(holder, len, "%s", strerror(errno));
        close(fd);
        return RUN_LOCK_NO_FILE;
    }
    lock_fd = fd;
    atexit(release);
    return RUN_LOCK_TAKEN;
}
