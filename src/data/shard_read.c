/* The shard reader: open and validate a set (src/data/shards.h), then read contiguous ranges of it. */
#include "data/shards.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/errors.h"
#include "data/h5util.h"
#include "data/idx.h"
#include "data/manifest.h"
#include "data/shard_names.h"

typedef struct {
    char *path;
    hid_t file, images, labels;
    uint64_t first, n;
} shard_file;

struct shard_set {
    char *dir, *prefix;
    int nfiles;
    uint64_t total;
    char sha256[128]; /* the set's source_sha256, "" when the files have none */
    shard_file *f;
};

/* What the files opened so far say about the whole set; each next file must agree. */
typedef struct {
    uint64_t total;      /* total_samples of shard 0 */
    uint64_t next_first; /* where the next shard must start */
    char sha256[128];    /* source_sha256 of the first file that has one */
    int have_sha;
} set_so_far;

/* ---------------------------------------------------------------- opening one file */

/* "shard '<path>'", how the h5util helpers name the file in their messages. */
static char *shard_what(const char *path)
{
    size_t n = strlen(path) + 16;
    char *w = xmalloc(n);
    snprintf(w, n, "shard '%s'", path);
    return w;
}

static void open_hdf5(shard_file *f)
{
    if (access(f->path, R_OK) != 0)
        die(EX_NOINPUT, "cannot read shard '%s': %s", f->path, strerror(errno));
    /* Many ranks open the same files read-only; shards are never modified in place (writers
     * rename complete files), and parallel file systems often lack flock. */
    hid_t fapl = h5_file_access(0);
    f->file = H5Fopen(f->path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f->file < 0)
        die(EX_DATAERR, "shard '%s' is not a readable HDF5 file (%s)", f->path, h5_msg());
}

static uint64_t need_u64_attr(const char *what, hid_t file, const char *name)
{
    uint64_t v = 0;
    if (!h5_read_u64_attr(what, file, name, &v))
        die(EX_DATAERR, "%s lacks the root attribute %s (not written by mnist2h5?)", what, name);
    return v;
}

/* Shard i's place in the set: the index and count its name gives, the same total as shard 0, and
 * starting where the previous shard ended. Returns its first_index. */
static uint64_t check_position(const shard_set *s, int i, const char *what, set_so_far *so_far)
{
    const shard_file *f = &s->f[i];
    uint64_t index = need_u64_attr(what, f->file, "shard_index");
    uint64_t count = need_u64_attr(what, f->file, "shard_count");
    uint64_t tot = need_u64_attr(what, f->file, "total_samples");
    uint64_t first = need_u64_attr(what, f->file, "first_index");
    if (index != (uint64_t)i || count != (uint64_t)s->nfiles)
        die(EX_DATAERR,
            "shard '%s' says it is shard %llu of %llu, but its name says %d of %d "
            "(a duplicated or renamed file?)",
            f->path, (unsigned long long)index, (unsigned long long)count, i, s->nfiles);
    if (tot > SHARDS_MAX_SAMPLES)
        die(EX_DATAERR,
            "shard '%s' declares %llu samples in its set, more than the %llu this reader accepts "
            "(a damaged file?)",
            f->path, (unsigned long long)tot, (unsigned long long)SHARDS_MAX_SAMPLES);
    if (i == 0)
        so_far->total = tot;
    else if (tot != so_far->total)
        die(EX_DATAERR,
            "shard '%s' says total_samples is %llu but '%s' says %llu (shards from different "
            "conversions?)",
            f->path, (unsigned long long)tot, s->f[0].path, (unsigned long long)so_far->total);
    if (first != so_far->next_first)
        die(EX_DATAERR,
            "shard '%s' starts at sample %llu, expected %llu after the previous shards "
            "(gap or overlap)",
            f->path, (unsigned long long)first, (unsigned long long)so_far->next_first);
    return first;
}

/* The prefix it was written with, and the same source as the other files. */
static void check_origin(const shard_set *s, const shard_file *f, const char *what, set_so_far *so_far)
{
    char buf[128];
    if (h5_read_str_attr(what, f->file, "prefix", buf, sizeof buf) && strcmp(buf, s->prefix) != 0)
        die(EX_DATAERR, "shard '%s' was written with prefix '%s', not '%s' (a renamed file?)", f->path, buf, s->prefix);
    if (!h5_read_str_attr(what, f->file, "source_sha256", buf, sizeof buf))
        return;
    if (!so_far->have_sha) {
        snprintf(so_far->sha256, sizeof so_far->sha256, "%s", buf);
        so_far->have_sha = 1;
    } else if (strcmp(buf, so_far->sha256) != 0) {
        die(EX_DATAERR,
            "shard '%s' comes from a different source (source_sha256 %.12s..., others "
            "%.12s...): shards from different conversions?",
            f->path, buf, so_far->sha256);
    }
}

static int shard_dims(const char *what, hid_t d, const char *name, hsize_t dims[8])
{
    int nd = h5_dims(d, dims);
    if (nd < 0)
        die(EX_DATAERR, "%s: cannot read the shape of /%s", what, name);
    return nd;
}

/* The chunks HDF5 will allocate whole while reading d (shape dims[nd]): within the dataset and
 * SHARDS_MAX_CHUNK_BYTES, so a damaged or hostile file cannot make it allocate gigabytes. */
static void check_chunks(const shard_file *f, hid_t d, const char *name, const hsize_t *dims, int nd)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        die(EX_DATAERR, "shard '%s': cannot read the storage layout of /%s (%s)", f->path, name, h5_msg());
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t c[8];
        int cn = H5Pget_chunk(dcpl, 8, c), ok = cn == nd;
        uint64_t bytes = 1;
        for (int k = 0; ok && k < nd; k++) {
            ok = c[k] >= 1 && c[k] <= dims[k]; /* dims are bounded: the product cannot overflow */
            bytes *= c[k];
        }
        if (!ok || bytes > SHARDS_MAX_CHUNK_BYTES) {
            char shape[128], chunk[128];
            h5_shape_str(dims, nd, shape, sizeof shape);
            h5_shape_str(c, cn > 0 && cn <= 8 ? cn : 0, chunk, sizeof chunk);
            die(EX_DATAERR,
                "shard '%s': /%s of shape %s declares chunks %s beyond its shape or %llu MiB "
                "(a damaged file?)",
                f->path, name, shape, chunk, (unsigned long long)(SHARDS_MAX_CHUNK_BYTES >> 20));
        }
    }
    H5Pclose(dcpl);
}

/* /images uint8 [n,28,28] and /labels uint8 [n], n bounded, with bounded chunks; sets f->n. */
static void open_datasets(shard_file *f, const char *what)
{
    hsize_t di[8], dl[8];
    char shape[128];
    f->images = h5_open_dataset(what, f->file, "images");
    h5_check_uint8(what, f->images, "images");
    int nd = shard_dims(what, f->images, "images", di);
    if (nd != 3 || di[1] != MNIST_ROWS || di[2] != MNIST_COLS) {
        h5_shape_str(di, nd, shape, sizeof shape);
        die(EX_DATAERR, "shard '%s': /images has shape %s, expected [n,%d,%d]", f->path, shape, MNIST_ROWS, MNIST_COLS);
    }
    if (di[0] > SHARDS_MAX_SAMPLES)
        die(EX_DATAERR,
            "shard '%s': /images declares %llu samples, more than the %llu this reader accepts "
            "(a damaged file?)",
            f->path, (unsigned long long)di[0], (unsigned long long)SHARDS_MAX_SAMPLES);
    check_chunks(f, f->images, "images", di, nd);
    f->labels = h5_open_dataset(what, f->file, "labels");
    h5_check_uint8(what, f->labels, "labels");
    nd = shard_dims(what, f->labels, "labels", dl);
    if (nd != 1 || dl[0] != di[0]) {
        h5_shape_str(dl, nd, shape, sizeof shape);
        die(EX_DATAERR, "shard '%s': /labels has shape %s, expected [%llu] like /images", f->path, shape,
            (unsigned long long)di[0]);
    }
    check_chunks(f, f->labels, "labels", dl, nd);
    f->n = di[0];
}

/* Open shard i (file `name`) and check it against the set and the files before it. */
static void open_file(shard_set *s, int i, const char *name, set_so_far *so_far)
{
    shard_file *f = &s->f[i];
    f->path = shard_join(s->dir, name);
    char *what = shard_what(f->path);
    open_hdf5(f);
    f->first = check_position(s, i, what, so_far);
    check_origin(s, f, what, so_far);
    open_datasets(f, what);
    uint64_t num = 0;
    if (h5_read_u64_attr(what, f->file, "num_samples", &num) && num != f->n)
        die(EX_DATAERR, "shard '%s': attribute num_samples is %llu but /images holds %llu", f->path,
            (unsigned long long)num, (unsigned long long)f->n);
    so_far->next_first = f->first + f->n;
    free(what);
}

/* ---------------------------------------------------------------- the set */

/* The shard count of the one complete set that the scanned names must form (dies otherwise). */
static int complete_set(const char *dir, const char *prefix, const shard_entry *v, size_t n)
{
    if (n == 0)
        die(EX_NOINPUT, "no shard files %s/%s-NNNNN-of-MMMMM.h5 (run 'make data' or mnist2h5)", dir, prefix);
    /* One set only: every file must carry the same shard count. */
    int m = v[0].count;
    for (size_t i = 0; i < n; i++) {
        if (v[i].count != m)
            die(EX_DATAERR,
                "shard directory '%s' mixes sets: '%s' and '%s' disagree on the shard count "
                "(leftovers of another conversion? remove the extra files)",
                dir, v[0].name, v[i].name);
        if (v[i].index >= m)
            die(EX_DATAERR, "extra shard '%s/%s': its index %d is not below the shard count %d", dir, v[i].name,
                v[i].index, m);
    }
    if (m == 0)
        die(EX_DATAERR, "shard '%s/%s' claims a set of 0 shards", dir, v[0].name);
    for (int i = 0; i < m; i++) {
        if ((size_t)i >= n || v[i].index != i) {
            char name[512];
            shards_name(name, sizeof name, prefix, i, m);
            die(EX_NOINPUT, "shard set %s/%s-*-of-%05d.h5 is incomplete: '%s' is missing", dir, prefix, m, name);
        }
    }
    return m;
}

/* Prove every file intact before HDF5 parses any (src/data/manifest.h). Every rank hashes what it opens
 * itself: ranks may see different files on a shared file system, and each must stop on its own view.
 * Without a manifest (another tool, an older mnist2h5) the set is unverified: one warning from
 * rank 0, then HDF5's own checks (Fletcher-32 on the data) are all there is. */
static manifest *verify_files(const char *dir, const char *prefix, const shard_entry *v, size_t n)
{
    manifest *mf = manifest_load(dir, prefix);
    if (mf)
        manifest_verify(mf, dir, v, n);
    else if (world_rank() == 0)
        warn("shard set %s/%s-*.h5 has no manifest %s.manifest (written by another tool or an older mnist2h5): "
             "not verified, only HDF5's own checks apply",
             dir, prefix, prefix);
    return mf;
}

/* What the opened files say must be what the verified manifest says. */
static void agree_with_manifest(const shard_set *s, const manifest *mf)
{
    for (int i = 0; i < s->nfiles; i++)
        if (s->f[i].n != mf->f[i].samples)
            die(EX_DATAERR, "shard '%s' holds %llu samples, its manifest '%s' says %llu", s->f[i].path,
                (unsigned long long)s->f[i].n, mf->path, (unsigned long long)mf->f[i].samples);
    if (strcmp(s->sha256, mf->source_sha256) != 0)
        die(EX_DATAERR, "shard set %s/%s-*.h5 has source_sha256 '%.12s', its manifest '%s' says '%.12s'", s->dir,
            s->prefix, s->sha256, mf->path, mf->source_sha256);
}

/* A loader holds one copy of a set in host memory, 785 bytes a sample (the CPU backend's, read straight into it,
 * or the staging copy a GPU's is uploaded from). Refuse what this process cannot hold (physical memory, or less
 * under RLIMIT_AS) before anyone allocates it. */
static void check_memory(const shard_set *s)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t limit = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < limit)
        limit = (uint64_t)rl.rlim_cur;
    uint64_t need = s->total * (MNIST_PIXELS + 1);
    if (need > limit)
        die(EX_OSERR,
            "shard set %s/%s-*.h5 holds %llu samples: loading it needs %llu MiB per rank, more than "
            "the %llu MiB this process may use",
            s->dir, s->prefix, (unsigned long long)s->total, (unsigned long long)(need >> 20),
            (unsigned long long)(limit >> 20));
}

shard_set *shards_open(const char *dir, const char *prefix)
{
    h5_quiet();
    if (!shards_prefix_ok(prefix))
        die(EX_USAGE, "invalid shard prefix '%s'", prefix ? prefix : "(null)");
    shard_entry *v = NULL;
    size_t n = 0;
    if (shard_scan_dir(dir, prefix, 0, &v, &n) != 0)
        die(EX_NOINPUT, "cannot open shard directory '%s': %s (run 'make data' or mnist2h5)", dir, strerror(errno));
    int m = complete_set(dir, prefix, v, n); /* names only: nothing parsed yet */
    manifest *mf = verify_files(dir, prefix, v, n);
    shard_set *s = xcalloc(1, sizeof *s);
    s->dir = xstrdup(dir);
    s->prefix = xstrdup(prefix);
    s->nfiles = m;
    s->f = xcalloc((size_t)m, sizeof *s->f);
    for (int i = 0; i < m; i++)
        s->f[i].file = s->f[i].images = s->f[i].labels = H5I_INVALID_HID;
    set_so_far so_far = {0};
    for (int i = 0; i < m; i++)
        open_file(s, i, v[i].name, &so_far);
    if (so_far.next_first != so_far.total)
        die(EX_DATAERR, "shard set %s/%s-*-of-%05d.h5: the shards hold %llu samples but total_samples says %llu", dir,
            prefix, m, (unsigned long long)so_far.next_first, (unsigned long long)so_far.total);
    s->total = so_far.total;
    memcpy(s->sha256, so_far.sha256, sizeof s->sha256);
    if (mf)
        agree_with_manifest(s, mf);
    check_memory(s);
    manifest_free(mf);
    shard_entries_free(v, n);
    return s;
}

uint64_t shards_total(const shard_set *s) { return s->total; }
int shards_files(const shard_set *s) { return s->nfiles; }
const char *shards_source_sha256(const shard_set *s) { return s->sha256; }

void shards_close(shard_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nfiles; i++) {
        if (s->f[i].images >= 0)
            H5Dclose(s->f[i].images);
        if (s->f[i].labels >= 0)
            H5Dclose(s->f[i].labels);
        if (s->f[i].file >= 0)
            H5Fclose(s->f[i].file);
        free(s->f[i].path);
    }
    free(s->f);
    free(s->dir);
    free(s->prefix);
    free(s);
}

/* ---------------------------------------------------------------- reading */

/* Shard holding global index g (the last one starting at or before g: empty shards are skipped). */
static int shard_of(const shard_set *s, uint64_t g)
{
    int lo = 0, hi = s->nfiles - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (s->f[mid].first <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void read_failed(const shard_file *f, const char *name)
{
    h5_error w = h5_last_error();
    if (w.fletcher)
        die(EX_DATAERR,
            "shard '%s': Fletcher-32 checksum mismatch reading /%s: the file is corrupted "
            "(regenerate it with mnist2h5)",
            f->path, name);
    die(EX_IOERR, "shard '%s': cannot read /%s: %s", f->path, name, w.desc);
}

/* Labels of local samples [start, start + m). */
static void check_labels(const shard_file *f, const uint8_t *lab, size_t m, uint64_t start)
{
    for (size_t i = 0; i < m; i++)
        if (lab[i] >= MNIST_CLASSES) {
            uint64_t l = start + i;
            die(EX_DATAERR, "shard '%s': label %u of sample %llu (local %llu) is out of range 0..%d", f->path, lab[i],
                (unsigned long long)(f->first + l), (unsigned long long)l, MNIST_CLASSES - 1);
        }
}

/* Local samples [start, start + len) of one dataset of one shard (rank 3: images, 1: labels), one
 * hyperslab, into out. */
static void read_block(const shard_file *f, hid_t d, const char *name, int rank, hsize_t start, hsize_t len, void *out)
{
    hid_t fs = H5Dget_space(d);
    hsize_t mdims[3] = {len, MNIST_ROWS, MNIST_COLS};
    hid_t ms = H5Screate_simple(rank, mdims, NULL);
    hsize_t start3[3] = {start, 0, 0}, count[3] = {1, 1, 1}, block[3] = {len, MNIST_ROWS, MNIST_COLS};
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start3, NULL, count, block);
    if (fs < 0 || ms < 0 || rc < 0)
        die(EX_SOFTWARE, "shard '%s': cannot build the HDF5 selection for /%s: %s", f->path, name, h5_msg());
    if (H5Dread(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, out) < 0)
        read_failed(f, name);
    H5Sclose(ms);
    H5Sclose(fs);
}

void shards_read_range(shard_set *s, uint64_t first, uint64_t count, uint8_t *images, uint8_t *labels)
{
    h5_quiet();
    if (count == 0 || (!images && !labels))
        return;
    if (first >= s->total || count > s->total - first)
        die(EX_SOFTWARE, "sample range [%llu, %llu) out of range: shard set %s/%s-* holds %llu samples",
            (unsigned long long)first, (unsigned long long)(first + count), s->dir, s->prefix,
            (unsigned long long)s->total);
    uint64_t g = first, end = first + count;
    while (g < end) {
        const shard_file *f = &s->f[shard_of(s, g)];
        uint64_t stop = f->first + f->n < end ? f->first + f->n : end;
        hsize_t start = g - f->first, len = stop - g;
        size_t off = (size_t)(g - first);
        if (images)
            read_block(f, f->images, "images", 3, start, len, images + off * MNIST_PIXELS);
        if (labels) {
            read_block(f, f->labels, "labels", 1, start, len, labels + off);
            check_labels(f, labels + off, len, start);
        }
        g = stop;
    }
}
