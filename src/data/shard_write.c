/* The shard writer (src/data/shards.h): every file under a temporary name, all renamed at the end; the
 * temporaries are removed on any failure, at exit and on SIGINT, SIGTERM, SIGHUP. */
#include "data/shards.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "data/h5util.h"
#include "data/idx.h"
#include "data/manifest.h"
#include "data/shard_names.h"

/* ---------------------------------------------------------------- temporaries */

/* The files of the write in progress, for the failure paths, atexit and signal handlers. */
enum { W_NONE = 0, W_TEMP = 1, W_FINAL = 2 };
static char **w_tmp, **w_final;
static volatile sig_atomic_t *w_state;
static volatile sig_atomic_t w_n;

static void w_cleanup(void)
{
    for (sig_atomic_t i = 0; i < w_n; i++) {
        if (w_state[i] == W_TEMP)
            unlink(w_tmp[i]);
        else if (w_state[i] == W_FINAL)
            unlink(w_final[i]); /* a set renamed only in part is no set */
        w_state[i] = W_NONE;
    }
}

static void w_signal(int sig)
{
    w_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void w_atexit(void) { w_cleanup(); }

static const int w_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define W_NSIG (sizeof w_signals / sizeof w_signals[0])

__attribute__((format(printf, 2, 3))) _Noreturn static void w_fail(int code, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w_cleanup();
    die(code, "%s", msg);
}

/* Name every file (final and temporary) before creating any, so every exit path removes them: the
 * shards, then the manifest (entry nshards), renamed last so that a set with a manifest is complete. */
static void register_files(const char *dir, const char *prefix, int nshards)
{
    static int atexit_done;
    w_tmp = xcalloc((size_t)nshards + 1, sizeof *w_tmp);
    w_final = xcalloc((size_t)nshards + 1, sizeof *w_final);
    w_state = xcalloc((size_t)nshards + 1, sizeof *w_state);
    char name[512], tname[600];
    for (int i = 0; i <= nshards; i++) {
        if (i < nshards)
            shards_name(name, sizeof name, prefix, i, nshards);
        else
            snprintf(name, sizeof name, "%s.manifest", prefix);
        snprintf(tname, sizeof tname, ".%s.tmp.%ld", name, (long)getpid());
        w_final[i] = shard_join(dir, name);
        w_tmp[i] = shard_join(dir, tname);
    }
    w_n = nshards + 1;
    if (!atexit_done) {
        atexit(w_atexit);
        atexit_done = 1;
    }
}

/* The write is over (committed): nothing left to clean up. */
static void forget_files(int nshards)
{
    for (int i = 0; i <= nshards; i++) {
        free(w_tmp[i]);
        free(w_final[i]);
    }
    free(w_tmp);
    free(w_final);
    free((void *)w_state);
    w_tmp = w_final = NULL;
    w_state = NULL;
}

/* Clean up on the signals, except those the caller ignores (nohup); old[] receives the handlers. */
static void catch_signals(struct sigaction old[W_NSIG])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = w_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < W_NSIG; k++) {
        sigaction(w_signals[k], NULL, &old[k]);
        if (old[k].sa_handler != SIG_IGN)
            sigaction(w_signals[k], &sa, NULL);
    }
}

/* Rename all nfiles temporaries to their final names, in order, or none: no signal in between; then
 * the caller's handlers again. */
static void commit_files(const char *dir, int nfiles, const struct sigaction old[W_NSIG])
{
    sigset_t block, saved;
    sigemptyset(&block);
    for (size_t k = 0; k < W_NSIG; k++)
        sigaddset(&block, w_signals[k]);
    sigprocmask(SIG_BLOCK, &block, &saved);
    for (int i = 0; i < nfiles; i++) {
        if (rename(w_tmp[i], w_final[i]) != 0) {
            int err = errno;
            w_fail(EX_CANTCREAT, "cannot rename '%s' to '%s': %s", w_tmp[i], w_final[i], strerror(err));
        }
        w_state[i] = W_FINAL;
    }
    (void)af_sync_dir(dir); /* best effort: the files are complete and in place either way */
    for (int i = 0; i < nfiles; i++)
        w_state[i] = W_NONE;
    w_n = 0;
    for (size_t k = 0; k < W_NSIG; k++)
        sigaction(w_signals[k], &old[k], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);
}

/* ---------------------------------------------------------------- one shard file */

/* What every shard of one write shares. */
typedef struct {
    const char *prefix;
    int nshards;
    const uint8_t *images, *labels;
    uint64_t total;
    const char *sha;
} write_job;

static int put_dataset(hid_t file, const char *name, int rank, uint64_t n, hsize_t chunk_n, const uint8_t *data)
{
    hsize_t dims[3] = {n, MNIST_ROWS, MNIST_COLS}, chunk[3] = {chunk_n < n ? chunk_n : n, MNIST_ROWS, MNIST_COLS};
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = sp >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, rank, chunk) >= 0 && H5Pset_fletcher32(dcpl) >= 0 &&
             H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0;
    hid_t d = ok ? H5Dcreate2(file, name, H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
    ok = d >= 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    if (d >= 0 && H5Dclose(d) < 0)
        ok = 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (sp >= 0)
        H5Sclose(sp);
    return ok ? 0 : -1;
}

/* The attributes and datasets of shard `index`: samples [first, first + n). 0, or -1. */
static int put_shard(hid_t file, const write_job *j, int index, uint64_t first, uint64_t n)
{
    uint64_t v[5] = {(uint64_t)index, (uint64_t)j->nshards, j->total, first, n};
    int ok = h5_write_attr(file, "shard_index", H5T_STD_U32LE, H5T_NATIVE_UINT64, &v[0]) == 0 &&
             h5_write_attr(file, "shard_count", H5T_STD_U32LE, H5T_NATIVE_UINT64, &v[1]) == 0 &&
             h5_write_attr(file, "total_samples", H5T_STD_U64LE, H5T_NATIVE_UINT64, &v[2]) == 0 &&
             h5_write_attr(file, "first_index", H5T_STD_U64LE, H5T_NATIVE_UINT64, &v[3]) == 0 &&
             h5_write_attr(file, "num_samples", H5T_STD_U64LE, H5T_NATIVE_UINT64, &v[4]) == 0 &&
             h5_write_str_attr(file, "source_sha256", j->sha) == 0 &&
             h5_write_str_attr(file, "prefix", j->prefix) == 0 &&
             put_dataset(file, "images", 3, n, SHARDS_IMAGES_CHUNK, j->images + first * MNIST_PIXELS) == 0 &&
             put_dataset(file, "labels", 1, n, SHARDS_LABELS_CHUNK, j->labels + first) == 0;
    return ok ? 0 : -1;
}

/* Shard `index` into its temporary, complete and synced, or w_fail. */
static void write_shard(const write_job *j, int index, uint64_t first, uint64_t n)
{
    const char *tmp = w_tmp[index];
    hid_t fapl = h5_file_access(1);
    hid_t file = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0) {
        int err = errno;
        w_fail(EX_CANTCREAT, "cannot create shard file '%s': %s (%s)", tmp, h5_msg(), strerror(err));
    }
    if (put_shard(file, j, index, first, n) != 0 || H5Fclose(file) < 0) {
        int err = errno;
        w_fail(EX_IOERR, "cannot write shard file '%s': %s (%s)", tmp, h5_msg(), strerror(err));
    }
    int fd = open(tmp, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        w_fail(EX_IOERR, "cannot sync shard file '%s': %s", tmp, strerror(err));
    }
    close(fd);
}

/* The manifest of the complete temporaries m->f[i].name (final names; samples set), into its own
 * temporary, or w_fail. */
static void write_manifest(const write_job *j, manifest *m)
{
    for (int i = 0; i < m->count; i++) {
        int err = manifest_hash_file(w_tmp[i], &m->f[i].bytes, m->f[i].sha256);
        if (err)
            w_fail(EX_IOERR, "cannot read back shard file '%s': %s", w_tmp[i], strerror(err));
    }
    w_state[m->count] = W_TEMP;
    int err = manifest_write(w_tmp[m->count], j->prefix, m);
    if (err == EEXIST)
        w_state[m->count] = W_NONE; /* someone else's file: not ours to remove */
    if (err)
        w_fail(err == EEXIST || err == EACCES ? EX_CANTCREAT : EX_IOERR, "cannot write the manifest '%s': %s",
               w_tmp[m->count], strerror(err));
}

/* ---------------------------------------------------------------- the set */

static int mkdir_p(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
    char *p = xstrdup(dir);
    for (char *q = p + 1; *q; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *q = '/';
    }
    int rc = mkdir(p, 0777);
    free(p);
    if (rc != 0 && errno == EEXIST)
        return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
    return rc;
}

/* Everything that can be checked before touching the file system, then the output directory. */
static void check_request(const char *dir, const char *prefix, int nshards, const uint8_t *labels, uint64_t n,
                          const char *sha)
{
    if (!shards_prefix_ok(prefix))
        die(EX_USAGE, "invalid shard prefix '%s': use letters, digits, '_', '.', '-' (not first)",
            prefix ? prefix : "(null)");
    if (n == 0 || n > SHARDS_MAX_SAMPLES)
        die(EX_DATAERR, "cannot write %llu samples to %s/%s-*.h5 (1..%llu)", (unsigned long long)n, dir, prefix,
            (unsigned long long)SHARDS_MAX_SAMPLES);
    if (sha[0] && (strlen(sha) != SHA256_HEX_LEN || strspn(sha, "0123456789abcdef") != SHA256_HEX_LEN))
        die(EX_SOFTWARE, "source digest '%.80s' is not a SHA-256 in lowercase hex", sha);
    if (nshards < 1 || nshards > SHARDS_MAX || (uint64_t)nshards > n)
        die(EX_USAGE, "cannot split %llu samples into %d shards (1..%llu)", (unsigned long long)n, nshards,
            (unsigned long long)(n < SHARDS_MAX ? n : SHARDS_MAX));
    for (uint64_t i = 0; i < n; i++)
        if (labels[i] >= MNIST_CLASSES)
            die(EX_DATAERR, "label %u of sample %llu is out of range 0..%d; not writing %s/%s-*.h5", labels[i],
                (unsigned long long)i, MNIST_CLASSES - 1, dir, prefix);
    if (mkdir_p(dir) != 0)
        die(EX_CANTCREAT, "cannot create output directory '%s': %s", dir, strerror(errno));
    if (access(dir, W_OK | X_OK) != 0)
        die(EX_CANTCREAT, "output directory '%s' is not writable: %s", dir, strerror(errno));
}

/* Leftovers of an earlier conversion with another shard count would make the set ambiguous. */
static void remove_stale(const char *dir, const char *prefix, int nshards)
{
    shard_entry *v = NULL;
    size_t nv = 0;
    if (shard_scan_dir(dir, prefix, 1, &v, &nv) != 0)
        return;
    for (size_t i = 0; i < nv; i++) {
        if (v[i].count == nshards)
            continue;
        char *p = shard_join(dir, v[i].name);
        if (unlink(p) == 0)
            warn("removed stale shard '%s' (from a conversion into %d shards)", p, v[i].count);
        else
            warn("cannot remove stale shard '%s': %s", p, strerror(errno));
        free(p);
    }
    shard_entries_free(v, nv);
}

void shards_write(const char *dir, const char *prefix, int nshards, const uint8_t *images, const uint8_t *labels,
                  uint64_t n, const char *source_sha256)
{
    h5_quiet();
    write_job j = {prefix, nshards, images, labels, n, source_sha256 ? source_sha256 : ""};
    check_request(dir, prefix, nshards, labels, n, j.sha);
    register_files(dir, prefix, nshards);
    struct sigaction old[W_NSIG];
    catch_signals(old);
    manifest m = {.count = nshards, .total = n, .f = xcalloc((size_t)nshards, sizeof *m.f)};
    snprintf(m.source_sha256, sizeof m.source_sha256, "%s", j.sha);
    /* Sizes differ by at most one: the first n % nshards shards get one more. */
    uint64_t base = n / (uint64_t)nshards, extra = n % (uint64_t)nshards, first = 0;
    for (int i = 0; i < nshards; i++) {
        uint64_t cnt = base + ((uint64_t)i < extra);
        w_state[i] = W_TEMP; /* before creation: the handler may race with H5Fcreate */
        write_shard(&j, i, first, cnt);
        m.f[i].name = strrchr(w_final[i], '/') + 1;
        m.f[i].samples = cnt;
        first += cnt;
    }
    write_manifest(&j, &m);
    free(m.f);
    commit_files(dir, nshards + 1, old);
    remove_stale(dir, prefix, nshards);
    forget_files(nshards);
}
