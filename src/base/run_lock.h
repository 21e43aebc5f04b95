/* One run per directory: an fcntl (POSIX) write lock on a file in it, held for the process's lifetime and
 * released by the kernel when the process ends however it ends. So a restarted or requeued run takes it back
 * at once. The file names its holder (host, pid, Slurm job, start time); a clean exit empties it, so a name
 * left in an unlocked file is a holder that was killed or whose node failed. */
#ifndef MNIST_RUN_LOCK_H
#define MNIST_RUN_LOCK_H
#include <stddef.h>

enum {
    RUN_LOCK_TAKEN,       /* ours; holder: a previous holder that ended without releasing it, or "" */
    RUN_LOCK_HELD,        /* another live process holds it; holder: who */
    RUN_LOCK_UNAVAILABLE, /* the file system does not lock (Lustre without -o flock); holder: why */
    RUN_LOCK_NO_FILE,     /* the lock file cannot be created; holder: why */
};

/* Try once, never waiting, to lock path (created if missing) for this process. */
int run_lock_take(const char *path, char *holder, size_t len);
#endif
