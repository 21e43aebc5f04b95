/* Output files that appear complete or not at all: written under a temporary name in the destination's
 * directory, made durable, then renamed over the final name.
 *
 * The temporary name is DIR/.<base>.<pid>.<n>@<host>.tmp, created with O_CREAT|O_EXCL|O_NOFOLLOW and mode
 * 0666 (the umask applies, as for any output): in a shared directory nobody can make us write through a
 * symlink or into a file they prepared. Signals that end the process (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
 * SIGUSR1/2) are held from af_open to af_commit/af_abort, so a write is finished or removed before they act.
 * Only SIGKILL (or a crash) can leave a temporary behind, and af_remove_stale removes those whose writer
 * on this host is gone.
 *
 * Sealed files (model files, checkpoints) start with a 512-byte header: a magic line, the format version
 * and the SHA-256 and length of the bytes after it. So a reader checks the whole file before the HDF5
 * library parses any of it (af_verify). HDF5 reads such a file as one with a 512-byte "userblock": it
 * looks for its signature at 0, 512, 1024... and takes the offset where it finds it as the file's base.
 * So h5py and PyTorch tooling read sealed files unchanged. */
#ifndef MNIST_ATOMIC_FILE_H
#define MNIST_ATOMIC_FILE_H
#include <signal.h>
#include <stddef.h>

enum { AF_PATH_LEN = 4096, AF_SEAL_BYTES = 512, AF_HELD_SIGNALS = 6 };

typedef struct {
    char path[AF_PATH_LEN];                  /* the final name */
    char tmp[AF_PATH_LEN];                   /* the temporary one, "" once renamed or removed */
    int fd;                                  /* open on tmp, read-write */
    struct sigaction saved[AF_HELD_SIGNALS]; /* the held signals' actions before af_open */
} atomic_file;

/* Creates the temporary for path. 0, or an errno value (nothing is left behind, signals restored). */
int af_open(atomic_file *a, const char *path);
/* Writes the seal of image (len bytes), then image after it. 0, or an errno value (ENOSPC, EFBIG...). */
int af_write_sealed(atomic_file *a, const void *image, size_t len);
/* write(2) of all len bytes, again after EINTR. 0, or an errno value (EIO for a write of nothing). */
int af_write_all(int fd, const void *buf, size_t len);
/* fsync of a directory (what a rename in it changed); 0 or an errno value. */
int af_sync_dir(const char *dir);
/* fsync, rename over the final name, fsync the directory. 0, or an errno value with the temporary removed. */
int af_commit(atomic_file *a);
/* Removes the temporary (any failure path). */
void af_abort(atomic_file *a);

/* Removes the temporaries for final names starting with path_prefix ("DIR/ckpt-", or a file's path) whose
 * writer on this host has exited (kill -9, power loss), saying so; returns how many. */
int af_remove_stale(const char *path_prefix);

enum { AF_SEALED, AF_UNSEALED, AF_BAD };
/* Checks path's seal:
 * - AF_SEALED: its bytes are those written;
 * - AF_UNSEALED: an HDF5 file without a seal (written by h5py, PyTorch tooling...), only HDF5's own checks apply;
 * - AF_BAD: damaged, truncated, not an HDF5 file or unreadable, with why ("checksum mismatch ...") for the
 *   caller's one line. */
int af_verify(const char *path, char *why, size_t len);
#endif
