#include "shards.h"

#include <dirent.h>
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

#include "errors.h"
#include "idx.h"

/* H5Pset_file_locking: HDF5 1.10.7+ and 1.12.1+. */
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
#define SHARDS_HAVE_FILE_LOCKING 1
#endif

#define MAX_RUNS_PER_READ 1024 /* bound the cost of building one HDF5 selection */
#define CACHE_MAX_BYTES ((size_t)64 << 20)

/* ---------------------------------------------------------------- HDF5 helpers */

static void h5_quiet(void)
{
    static int done;
    if (!done) {
        if (H5open() < 0)
            die(EX_SOFTWARE, "cannot initialise the HDF5 library");
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        done = 1;
    }
}

typedef struct {
    char desc[200];
    int fletcher;
} h5_error;

static int contains_nocase(const char *s, const char *word)
{
    size_t n = strlen(word);
    for (; s && *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && (s[i] | 0x20) == (word[i] | 0x20))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

static herr_t h5_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    h5_error *w = data;
    if (contains_nocase(e->desc, "fletcher") || contains_nocase(e->func_name, "fletcher"))
        w->fletcher = 1;
    if (n == 0)
        snprintf(w->desc, sizeof w->desc, "%s", e->desc ? e->desc : "unknown HDF5 error");
    return 0;
}

/* The innermost message of the current HDF5 error stack (then cleared). */
static h5_error h5_last_error(void)
{
    h5_error w;
    memset(&w, 0, sizeof w);
    snprintf(w.desc, sizeof w.desc, "unknown HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk, &w);
    H5Eclear2(H5E_DEFAULT);
    return w;
}

static const char *h5_msg(void)
{
    static char buf[200];
    h5_error w = h5_last_error();
    snprintf(buf, sizeof buf, "%s", w.desc);
    return buf;
}

/* ---------------------------------------------------------------- names */

int shards_prefix_ok(const char *prefix)
{
    size_t len = prefix ? strlen(prefix) : 0;
    if (len == 0 || len > 64 || prefix[0] == '.' || prefix[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = prefix[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

char *shards_name(char *buf, size_t len, const char *prefix, int index, int count)
{
    snprintf(buf, len, "%s-%05d-of-%05d.h5", prefix, index, count);
    return buf;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* Parse "<prefix>-<digits>-of-<digits>.h5". Returns 0 if name is not of that form, 1 if it is and
 * canonical (5-digit padding), -1 if it is of that form but not canonical. */
static int parse_name(const char *name, const char *prefix, int *index, int *count)
{
    size_t plen = strlen(prefix), len = strlen(name);
    if (len < plen + 1 || strncmp(name, prefix, plen) != 0 || name[plen] != '-')
        return 0;
    const char *p = name + plen + 1;
    long a = 0, b = 0;
    int da = 0, db = 0;
    for (; *p >= '0' && *p <= '9'; p++, da++)
        if (da < 9)
            a = a * 10 + (*p - '0');
    if (!da || strncmp(p, "-of-", 4) != 0)
        return 0;
    for (p += 4; *p >= '0' && *p <= '9'; p++, db++)
        if (db < 9)
            b = b * 10 + (*p - '0');
    if (!db || strcmp(p, ".h5") != 0)
        return 0;
    if (da > 9 || db > 9 || a > SHARDS_MAX || b > SHARDS_MAX)
        return -1;
    char canon[512];
    shards_name(canon, sizeof canon, prefix, (int)a, (int)b);
    if (strcmp(canon, name) != 0)
        return -1;
    *index = (int)a;
    *count = (int)b;
    return 1;
}

typedef struct {
    char *name;
    int index, count;
} name_entry;

static int cmp_entry(const void *a, const void *b)
{
    const name_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* All "<prefix>-NNNNN-of-MMMMM.h5" in dir, sorted by (count, index). Returns -1 if dir cannot be
 * opened (errno set). Non-canonical look-alikes die EX_DATAERR unless `lenient`. */
static int scan_dir(const char *dir, const char *prefix, int lenient, name_entry **out, size_t *nout)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t n = 0, cap = 16;
    name_entry *v = xmalloc(cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int index = 0, count = 0;
        if (e->d_name[0] == '.')
            continue;
        int r = parse_name(e->d_name, prefix, &index, &count);
        if (r == 0)
            continue;
        if (r < 0) {
            if (lenient)
                continue;
            die(EX_DATAERR, "unexpected file '%s' in shard directory '%s': shard files are named "
                "%s-NNNNN-of-MMMMM.h5 (5 digits, count <= %d)", e->d_name, dir, prefix, SHARDS_MAX);
        }
        if (n == cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        if (!v)
            die(EX_OSERR, "out of memory listing '%s'", dir);
        v[n].name = xstrdup(e->d_name);
        v[n].index = index;
        v[n].count = count;
        n++;
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_entry);
    *out = v;
    *nout = n;
    return 0;
}

/* ---------------------------------------------------------------- reader */

typedef struct {
    char *path;
    hid_t file, images, labels;
    uint64_t first, n;
    uint64_t chunk; /* images per chunk of /images (n if not chunked) */
} shard_file;

struct shard_set {
    char *dir, *prefix;
    int nfiles;
    uint64_t total;
    shard_file *f;
    char sha256[128];
};

static hid_t open_dataset(const char *path, hid_t file, const char *name, size_t cache_bytes)
{
    htri_t ex = H5Lexists(file, name, H5P_DEFAULT);
    if (ex <= 0)
        die(EX_DATAERR, "shard '%s' has no /%s dataset", path, name);
    hid_t o = H5Oopen(file, name, H5P_DEFAULT);
    if (o < 0 || H5Iget_type(o) != H5I_DATASET)
        die(EX_DATAERR, "shard '%s': /%s is not a dataset", path, name);
    H5Oclose(o);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (cache_bytes < ((size_t)1 << 20))
        cache_bytes = (size_t)1 << 20;
    if (cache_bytes > CACHE_MAX_BYTES)
        cache_bytes = CACHE_MAX_BYTES;
    H5Pset_chunk_cache(dapl, 10007, cache_bytes, 0.75);
    hid_t d = H5Dopen2(file, name, dapl);
    H5Pclose(dapl);
    if (d < 0)
        die(EX_DATAERR, "shard '%s': cannot open /%s: %s", path, name, h5_msg());
    return d;
}

static void describe_type(hid_t t, char *buf, size_t len)
{
    H5T_class_t c = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    switch (c) {
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", size * 8);
        break;
    case H5T_FLOAT:
        snprintf(buf, len, "float%zu", size * 8);
        break;
    case H5T_STRING:
        snprintf(buf, len, "string");
        break;
    case H5T_COMPOUND:
        snprintf(buf, len, "compound");
        break;
    default:
        snprintf(buf, len, "HDF5 type class %d", (int)c);
        break;
    }
}

static void check_uint8(const char *path, hid_t d, const char *name)
{
    hid_t t = H5Dget_type(d);
    if (t < 0)
        die(EX_DATAERR, "shard '%s': cannot read the type of /%s: %s", path, name, h5_msg());
    int ok = H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 1 && H5Tget_sign(t) == H5T_SGN_NONE;
    if (!ok) {
        char what[64];
        describe_type(t, what, sizeof what);
        H5Tclose(t);
        die(EX_DATAERR, "shard '%s': /%s has type %s, expected uint8", path, name, what);
    }
    H5Tclose(t);
}

/* Dimensions of a dataset; returns its rank (<= 8 dims stored). */
static int get_dims(const char *path, hid_t d, const char *name, hsize_t dims[8])
{
    hid_t sp = H5Dget_space(d);
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (nd < 0 || nd > 8)
        die(EX_DATAERR, "shard '%s': cannot read the shape of /%s", path, name);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp);
    return nd;
}

static void shape_str(const hsize_t *dims, int nd, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < nd && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

/* Integer attribute on the root group; returns 0 if absent. */
static int read_u64_attr(const char *path, hid_t file, const char *name, uint64_t *v)
{
    htri_t ex = H5Aexists(file, name);
    if (ex < 0)
        die(EX_DATAERR, "shard '%s': cannot look up attribute %s: %s", path, name, h5_msg());
    if (!ex)
        return 0;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    hid_t sp = a < 0 ? -1 : H5Aget_space(a);
    if (a < 0 || t < 0 || sp < 0)
        die(EX_DATAERR, "shard '%s': cannot open attribute %s: %s", path, name, h5_msg());
    if (H5Tget_class(t) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1)
        die(EX_DATAERR, "shard '%s': attribute %s is not a single integer", path, name);
    if (H5Tget_sign(t) != H5T_SGN_NONE) {
        int64_t sv;
        if (H5Aread(a, H5T_NATIVE_INT64, &sv) < 0)
            die(EX_DATAERR, "shard '%s': cannot read attribute %s: %s", path, name, h5_msg());
        if (sv < 0)
            die(EX_DATAERR, "shard '%s': attribute %s is negative (%lld)", path, name, (long long)sv);
        *v = (uint64_t)sv;
    } else if (H5Aread(a, H5T_NATIVE_UINT64, v) < 0) {
        die(EX_DATAERR, "shard '%s': cannot read attribute %s: %s", path, name, h5_msg());
    }
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return 1;
}

static uint64_t need_u64_attr(const char *path, hid_t file, const char *name)
{
    uint64_t v = 0;
    if (!read_u64_attr(path, file, name, &v))
        die(EX_DATAERR, "shard '%s' lacks the root attribute %s (not written by mnist2h5?)", path, name);
    return v;
}

/* String attribute (fixed or variable length) into buf; returns 0 if absent. */
static int read_str_attr(const char *path, hid_t file, const char *name, char *buf, size_t len)
{
    htri_t ex = H5Aexists(file, name);
    if (ex <= 0)
        return 0;
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    if (a < 0 || t < 0 || H5Tget_class(t) != H5T_STRING)
        die(EX_DATAERR, "shard '%s': attribute %s is not a string", path, name);
    hid_t mt = H5Tcopy(H5T_C_S1);
    int ok;
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        H5Tset_size(mt, H5T_VARIABLE);
        ok = H5Aread(a, mt, &s) >= 0;
        snprintf(buf, len, "%s", ok && s ? s : "");
        if (s)
            H5free_memory(s);
    } else {
        size_t sz = H5Tget_size(t);
        char *tmp = xcalloc(sz + 1, 1);
        H5Tset_size(mt, sz + 1);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        ok = H5Aread(a, mt, tmp) >= 0;
        snprintf(buf, len, "%s", tmp);
        free(tmp);
    }
    if (!ok)
        die(EX_DATAERR, "shard '%s': cannot read attribute %s: %s", path, name, h5_msg());
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    return 1;
}

static hid_t reader_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef SHARDS_HAVE_FILE_LOCKING
    /* Many ranks open the same files read-only; shards are never modified in place (writers
     * rename complete files), and parallel file systems often lack flock. */
    H5Pset_file_locking(fapl, 0, 1);
#endif
    return fapl;
}

static void open_file(shard_set *s, int i, const char *name, uint64_t *total, uint64_t *next_first, char *sha,
                      int *have_sha)
{
    shard_file *f = &s->f[i];
    f->path = join(s->dir, name);
    if (access(f->path, R_OK) != 0)
        die(EX_NOINPUT, "cannot read shard '%s': %s", f->path, strerror(errno));
    hid_t fapl = reader_fapl();
    f->file = H5Fopen(f->path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f->file < 0)
        die(EX_DATAERR, "shard '%s' is not a readable HDF5 file (%s)", f->path, h5_msg());

    uint64_t index = need_u64_attr(f->path, f->file, "shard_index");
    uint64_t count = need_u64_attr(f->path, f->file, "shard_count");
    uint64_t tot = need_u64_attr(f->path, f->file, "total_samples");
    uint64_t first = need_u64_attr(f->path, f->file, "first_index");
    if (index != (uint64_t)i || count != (uint64_t)s->nfiles)
        die(EX_DATAERR, "shard '%s' says it is shard %llu of %llu, but its name says %d of %d "
            "(a duplicated or renamed file?)", f->path, (unsigned long long)index, (unsigned long long)count, i,
            s->nfiles);
    if (i == 0)
        *total = tot;
    else if (tot != *total)
        die(EX_DATAERR, "shard '%s' says total_samples is %llu but '%s' says %llu (shards from different "
            "conversions?)", f->path, (unsigned long long)tot, s->f[0].path, (unsigned long long)*total);
    if (first != *next_first)
        die(EX_DATAERR, "shard '%s' starts at sample %llu, expected %llu after the previous shards "
            "(gap or overlap)", f->path, (unsigned long long)first, (unsigned long long)*next_first);

    char buf[128];
    if (read_str_attr(f->path, f->file, "prefix", buf, sizeof buf) && strcmp(buf, s->prefix) != 0)
        die(EX_DATAERR, "shard '%s' was written with prefix '%s', not '%s' (a renamed file?)", f->path, buf,
            s->prefix);
    if (read_str_attr(f->path, f->file, "source_sha256", buf, sizeof buf)) {
        if (!*have_sha) {
            snprintf(sha, 128, "%s", buf);
            *have_sha = 1;
        } else if (strcmp(buf, sha) != 0) {
            die(EX_DATAERR, "shard '%s' comes from a different source (source_sha256 %.12s..., others "
                "%.12s...): shards from different conversions?", f->path, buf, sha);
        }
    }

    f->images = open_dataset(f->path, f->file, "images", 0);
    check_uint8(f->path, f->images, "images");
    hsize_t di[8], dl[8];
    char shape[128];
    int nd = get_dims(f->path, f->images, "images", di);
    if (nd != 3 || di[1] != IDX_ROWS || di[2] != IDX_COLS) {
        shape_str(di, nd, shape, sizeof shape);
        die(EX_DATAERR, "shard '%s': /images has shape %s, expected [n,%d,%d]", f->path, shape, IDX_ROWS,
            IDX_COLS);
    }
    f->labels = open_dataset(f->path, f->file, "labels", 0);
    check_uint8(f->path, f->labels, "labels");
    nd = get_dims(f->path, f->labels, "labels", dl);
    if (nd != 1 || dl[0] != di[0]) {
        shape_str(dl, nd, shape, sizeof shape);
        die(EX_DATAERR, "shard '%s': /labels has shape %s, expected [%llu] like /images", f->path, shape,
            (unsigned long long)di[0]);
    }
    f->n = di[0];
    f->first = first;
    uint64_t num = 0;
    if (read_u64_attr(f->path, f->file, "num_samples", &num) && num != f->n)
        die(EX_DATAERR, "shard '%s': attribute num_samples is %llu but /images holds %llu", f->path,
            (unsigned long long)num, (unsigned long long)f->n);
    /* Re-open with a chunk cache big enough to keep the whole shard (up to 64 MiB) in memory:
     * random minibatches touch most chunks every step. */
    H5Dclose(f->images);
    H5Dclose(f->labels);
    f->images = open_dataset(f->path, f->file, "images", (size_t)(f->n * IDX_PIXELS));
    f->labels = open_dataset(f->path, f->file, "labels", (size_t)f->n);
    f->chunk = f->n ? f->n : 1;
    hid_t dcpl = H5Dget_create_plist(f->images);
    hsize_t cd[3];
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 3, cd) == 3 && cd[0] > 0)
        f->chunk = cd[0];
    if (dcpl >= 0)
        H5Pclose(dcpl);
    *next_first = first + f->n;
}

shard_set *shards_open(const char *dir, const char *prefix)
{
    h5_quiet();
    if (!shards_prefix_ok(prefix))
        die(EX_USAGE, "invalid shard prefix '%s'", prefix ? prefix : "(null)");
    name_entry *v = NULL;
    size_t n = 0;
    if (scan_dir(dir, prefix, 0, &v, &n) != 0)
        die(EX_NOINPUT, "cannot open shard directory '%s': %s (run 'make data' or mnist2h5)", dir,
            strerror(errno));
    if (n == 0)
        die(EX_NOINPUT, "no shard files %s/%s-NNNNN-of-MMMMM.h5 (run 'make data' or mnist2h5)", dir, prefix);
    /* One set only: every file must carry the same shard count. */
    int m = v[0].count;
    for (size_t i = 0; i < n; i++) {
        if (v[i].count != m)
            die(EX_DATAERR, "shard directory '%s' mixes sets: '%s' and '%s' disagree on the shard count "
                "(leftovers of another conversion? remove the extra files)", dir, v[0].name, v[i].name);
        if (v[i].index >= m)
            die(EX_DATAERR, "extra shard '%s/%s': its index %d is not below the shard count %d", dir,
                v[i].name, v[i].index, m);
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
    shard_set *s = xcalloc(1, sizeof *s);
    s->dir = xstrdup(dir);
    s->prefix = xstrdup(prefix);
    s->nfiles = m;
    s->f = xcalloc((size_t)m, sizeof *s->f);
    for (int i = 0; i < m; i++)
        s->f[i].file = s->f[i].images = s->f[i].labels = H5I_INVALID_HID;
    uint64_t total = 0, next = 0;
    int have_sha = 0;
    for (int i = 0; i < m; i++)
        open_file(s, i, v[i].name, &total, &next, s->sha256, &have_sha);
    if (next != total)
        die(EX_DATAERR, "shard set %s/%s-*-of-%05d.h5: the shards hold %llu samples but total_samples says %llu",
            dir, prefix, m, (unsigned long long)next, (unsigned long long)total);
    s->total = total;
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    return s;
}

uint64_t shards_total(const shard_set *s) { return s->total; }
int shards_files(const shard_set *s) { return s->nfiles; }
const char *shards_file_path(const shard_set *s, int i) { return s->f[i].path; }
uint64_t shards_file_first(const shard_set *s, int i) { return s->f[i].first; }
uint64_t shards_file_count(const shard_set *s, int i) { return s->f[i].n; }
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
        die(EX_DATAERR, "shard '%s': Fletcher-32 checksum mismatch reading /%s: the file is corrupted "
            "(regenerate it with mnist2h5)", f->path, name);
    die(EX_IOERR, "shard '%s': cannot read /%s: %s", f->path, name, w.desc);
}

static void check_labels(const shard_file *f, const uint8_t *lab, size_t m, const uint64_t *local, uint64_t start)
{
    for (size_t i = 0; i < m; i++)
        if (lab[i] >= IDX_NUM_CLASSES) {
            uint64_t l = local ? local[i] : start + i;
            die(EX_DATAERR, "shard '%s': label %u of sample %llu (local %llu) is out of range 0..%d", f->path,
                lab[i], (unsigned long long)(f->first + l), (unsigned long long)l, IDX_NUM_CLASSES - 1);
        }
}

/* One dataset, selection = union of runs [run_start[k], run_start[k] + run_len[k]) along dim 0,
 * or (points) the individual local indices. */
static void read_selection(const shard_file *f, hid_t d, const char *name, int rank, const hsize_t *run_start,
                           const hsize_t *run_len, size_t nruns, const hsize_t *points, size_t m, void *out)
{
    hid_t fs = H5Dget_space(d);
    hsize_t mdims[3] = {m, IDX_ROWS, IDX_COLS};
    hid_t ms = H5Screate_simple(rank, mdims, NULL);
    herr_t rc = 0;
    if (points) {
        rc = H5Sselect_elements(fs, H5S_SELECT_SET, m, points);
    } else {
        for (size_t k = 0; k < nruns && rc >= 0; k++) {
            hsize_t start[3] = {run_start[k], 0, 0}, count[3] = {1, 1, 1};
            hsize_t block[3] = {run_len[k], IDX_ROWS, IDX_COLS};
            rc = H5Sselect_hyperslab(fs, k ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL, count, block);
        }
    }
    if (fs < 0 || ms < 0 || rc < 0)
        die(EX_SOFTWARE, "shard '%s': cannot build the HDF5 selection for /%s: %s", f->path, name, h5_msg());
    if (H5Dread(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, out) < 0)
        read_failed(f, name);
    H5Sclose(ms);
    H5Sclose(fs);
}

/* Images [start, start + len) of one shard, one hyperslab, into out. */
static void read_block(const shard_file *f, hid_t d, const char *name, int rank, uint64_t start, uint64_t len,
                       void *out)
{
    hsize_t s0 = start, l0 = len;
    read_selection(f, d, name, rank, &s0, &l0, 1, NULL, (size_t)len, out);
}

/* Read m sorted, distinct local indices of one shard into consecutive outputs.
 * Images: HDF5 1.10 maps irregular selections onto chunks element by element (784 per image),
 * so a union of hyperslabs is slow. A dense set (span <= DENSE_FACTOR * m, and no gap as long as
 * a chunk, so every chunk of the span holds a wanted image: HDF5 reads exactly the chunks it would
 * read anyway) is read as one hyperslab over its span and gathered; a sparse one as one hyperslab
 * read per run of consecutive indices.
 * Labels (1 byte each): the same dense read, else a point selection for scattered indices and a
 * union of runs for mostly consecutive ones. */
#define DENSE_FACTOR 16
static void read_local(const shard_file *f, const uint64_t *local, size_t m, uint8_t *img, uint8_t *lab)
{
    if (m == 0)
        return;
    uint64_t lo = local[0], span = local[m - 1] - local[0] + 1;
    int dense = m > 1 && span <= (uint64_t)DENSE_FACTOR * m && span * IDX_PIXELS <= CACHE_MAX_BYTES;
    for (size_t i = 1; i < m && dense; i++)
        if (local[i] - local[i - 1] >= f->chunk)
            dense = 0;
    if (img) {
        if (span == m) {
            read_block(f, f->images, "images", 3, lo, span, img);
        } else if (dense) {
            uint8_t *tmp = xmalloc((size_t)span * IDX_PIXELS);
            read_block(f, f->images, "images", 3, lo, span, tmp);
            for (size_t i = 0; i < m; i++)
                memcpy(img + i * IDX_PIXELS, tmp + (local[i] - lo) * IDX_PIXELS, IDX_PIXELS);
            free(tmp);
        } else {
            size_t i = 0;
            while (i < m) {
                size_t k = i + 1;
                while (k < m && local[k] == local[k - 1] + 1)
                    k++;
                read_block(f, f->images, "images", 3, local[i], k - i, img + i * IDX_PIXELS);
                i = k;
            }
        }
    }
    if (!lab)
        return;
    if (span == m) {
        read_block(f, f->labels, "labels", 1, lo, span, lab);
    } else if (dense) {
        uint8_t *tmp = xmalloc((size_t)span);
        read_block(f, f->labels, "labels", 1, lo, span, tmp);
        for (size_t i = 0; i < m; i++)
            lab[i] = tmp[local[i] - lo];
        free(tmp);
    } else {
        hsize_t *rs = xmalloc(MAX_RUNS_PER_READ * sizeof *rs), *rl = xmalloc(MAX_RUNS_PER_READ * sizeof *rl);
        hsize_t *pts = xmalloc(m * sizeof *pts);
        size_t i = 0;
        while (i < m) {
            /* Up to MAX_RUNS_PER_READ runs starting at local[i]: a selection's cost grows with them. */
            size_t nruns = 0, j = i;
            while (j < m && nruns < MAX_RUNS_PER_READ) {
                size_t k = j + 1;
                while (k < m && local[k] == local[k - 1] + 1)
                    k++;
                rs[nruns] = local[j];
                rl[nruns] = k - j;
                nruns++;
                j = k;
            }
            size_t cnt = j - i;
            if (nruns * 2 > cnt) {
                for (size_t k = 0; k < cnt; k++)
                    pts[k] = local[i + k];
                read_selection(f, f->labels, "labels", 1, NULL, NULL, 0, pts, cnt, lab + i);
            } else {
                read_selection(f, f->labels, "labels", 1, rs, rl, nruns, NULL, cnt, lab + i);
            }
            i = j;
        }
        free(rs);
        free(rl);
        free(pts);
    }
    check_labels(f, lab, m, local, 0);
}

static void check_index(const shard_set *s, uint64_t g)
{
    if (g >= s->total)
        die(EX_SOFTWARE, "sample index %llu out of range: shard set %s/%s-* holds %llu samples",
            (unsigned long long)g, s->dir, s->prefix, (unsigned long long)s->total);
}

/* Sorted, distinct global indices into consecutive outputs, grouped by shard. */
static void read_sorted(shard_set *s, const uint64_t *g, size_t n, uint8_t *img, uint8_t *lab)
{
    uint64_t *local = xmalloc(n * sizeof *local);
    size_t i = 0;
    while (i < n) {
        int sh = shard_of(s, g[i]);
        const shard_file *f = &s->f[sh];
        size_t j = i;
        while (j < n && g[j] < f->first + f->n) {
            local[j] = g[j] - f->first;
            j++;
        }
        read_local(f, local + i, j - i, img ? img + i * IDX_PIXELS : NULL, lab ? lab + i : NULL);
        i = j;
    }
    free(local);
}

typedef struct {
    uint64_t g;
    size_t pos;
} idx_pos;

static int cmp_idx_pos(const void *a, const void *b)
{
    const idx_pos *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

void shards_read(shard_set *s, const uint64_t *idx, size_t n, uint8_t *images, uint8_t *labels)
{
    h5_quiet();
    if (n == 0 || (!images && !labels))
        return;
    int increasing = 1;
    for (size_t i = 0; i < n; i++) {
        check_index(s, idx[i]);
        if (i && idx[i] <= idx[i - 1])
            increasing = 0;
    }
    if (increasing) {
        read_sorted(s, idx, n, images, labels);
        return;
    }
    /* Any order, duplicates: read the distinct indices in file order, then scatter. */
    idx_pos *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        p[i].g = idx[i];
        p[i].pos = i;
    }
    qsort(p, n, sizeof *p, cmp_idx_pos);
    uint64_t *u = xmalloc(n * sizeof *u);
    size_t *slot = xmalloc(n * sizeof *slot); /* p[i] -> index into u */
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nu || u[nu - 1] != p[i].g)
            u[nu++] = p[i].g;
        slot[i] = nu - 1;
    }
    uint8_t *ti = images ? xmalloc(nu * IDX_PIXELS) : NULL, *tl = labels ? xmalloc(nu) : NULL;
    read_sorted(s, u, nu, ti, tl);
    for (size_t i = 0; i < n; i++) {
        if (images)
            memcpy(images + p[i].pos * IDX_PIXELS, ti + slot[i] * IDX_PIXELS, IDX_PIXELS);
        if (labels)
            labels[p[i].pos] = tl[slot[i]];
    }
    free(ti);
    free(tl);
    free(slot);
    free(u);
    free(p);
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
            read_selection(f, f->images, "images", 3, &start, &len, 1, NULL, len, images + off * IDX_PIXELS);
        if (labels) {
            read_selection(f, f->labels, "labels", 1, &start, &len, 1, NULL, len, labels + off);
            check_labels(f, labels + off, len, NULL, start);
        }
        g = stop;
    }
}

/* ---------------------------------------------------------------- writer */

/* The temporaries of the write in progress, for the failure paths, atexit and signal handlers. */
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

static int put_uint_attr(hid_t file, const char *name, hid_t type, uint64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_UINT64, &v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

static int put_str_attr(hid_t file, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, H5T_CSET_ASCII);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, t, v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    return ok ? 0 : -1;
}

static int put_dataset(hid_t file, const char *name, int rank, uint64_t n, hsize_t chunk_n, const uint8_t *data)
{
    hsize_t dims[3] = {n, IDX_ROWS, IDX_COLS}, chunk[3] = {chunk_n < n ? chunk_n : n, IDX_ROWS, IDX_COLS};
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

static void write_shard(const char *tmp, const char *prefix, int index, int count, const uint8_t *images,
                        const uint8_t *labels, uint64_t first, uint64_t n, uint64_t total, const char *sha)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef SHARDS_HAVE_FILE_LOCKING
    H5Pset_file_locking(fapl, 1, 1);
#endif
    hid_t file = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0) {
        int err = errno;
        w_fail(EX_CANTCREAT, "cannot create shard file '%s': %s (%s)", tmp, h5_msg(), strerror(err));
    }
    int ok = put_uint_attr(file, "shard_index", H5T_STD_U32LE, (uint64_t)index) == 0 &&
             put_uint_attr(file, "shard_count", H5T_STD_U32LE, (uint64_t)count) == 0 &&
             put_uint_attr(file, "total_samples", H5T_STD_U64LE, total) == 0 &&
             put_uint_attr(file, "first_index", H5T_STD_U64LE, first) == 0 &&
             put_uint_attr(file, "num_samples", H5T_STD_U64LE, n) == 0 &&
             put_str_attr(file, "source_sha256", sha) == 0 && put_str_attr(file, "prefix", prefix) == 0 &&
             put_dataset(file, "images", 3, n, SHARDS_IMAGES_CHUNK, images + first * IDX_PIXELS) == 0 &&
             put_dataset(file, "labels", 1, n, SHARDS_LABELS_CHUNK, labels + first) == 0;
    if (!ok) {
        int err = errno;
        w_fail(EX_IOERR, "cannot write shard file '%s': %s (%s)", tmp, h5_msg(), strerror(err));
    }
    if (H5Fclose(file) < 0) {
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

void shards_write(const char *dir, const char *prefix, int nshards, const uint8_t *images, const uint8_t *labels,
                  uint64_t n, const char *source_sha256)
{
    static int atexit_done;
    h5_quiet();
    if (!shards_prefix_ok(prefix))
        die(EX_USAGE, "invalid shard prefix '%s': use letters, digits, '_', '.', '-' (not first)",
            prefix ? prefix : "(null)");
    if (n == 0)
        die(EX_DATAERR, "no samples to write to %s/%s-*.h5", dir, prefix);
    if (nshards < 1 || nshards > SHARDS_MAX || (uint64_t)nshards > n)
        die(EX_USAGE, "cannot split %llu samples into %d shards (1..%llu)", (unsigned long long)n, nshards,
            (unsigned long long)(n < SHARDS_MAX ? n : SHARDS_MAX));
    for (uint64_t i = 0; i < n; i++)
        if (labels[i] >= IDX_NUM_CLASSES)
            die(EX_DATAERR, "label %u of sample %llu is out of range 0..%d; not writing %s/%s-*.h5", labels[i],
                (unsigned long long)i, IDX_NUM_CLASSES - 1, dir, prefix);
    if (mkdir_p(dir) != 0)
        die(EX_CANTCREAT, "cannot create output directory '%s': %s", dir, strerror(errno));
    if (access(dir, W_OK | X_OK) != 0)
        die(EX_CANTCREAT, "output directory '%s' is not writable: %s", dir, strerror(errno));
    const char *sha = source_sha256 ? source_sha256 : "";

    /* Register the temporaries before creating any, so every exit path removes them. */
    w_tmp = xcalloc((size_t)nshards, sizeof *w_tmp);
    w_final = xcalloc((size_t)nshards, sizeof *w_final);
    w_state = xcalloc((size_t)nshards, sizeof *w_state);
    char name[512], tname[600];
    for (int i = 0; i < nshards; i++) {
        shards_name(name, sizeof name, prefix, i, nshards);
        snprintf(tname, sizeof tname, ".%s.tmp.%ld", name, (long)getpid());
        w_final[i] = join(dir, name);
        w_tmp[i] = join(dir, tname);
    }
    w_n = nshards;
    if (!atexit_done) {
        atexit(w_atexit);
        atexit_done = 1;
    }
    struct sigaction sa, old[W_NSIG];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = w_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < W_NSIG; k++) {
        sigaction(w_signals[k], NULL, &old[k]);
        if (old[k].sa_handler != SIG_IGN) /* keep ignoring what the caller ignores (nohup) */
            sigaction(w_signals[k], &sa, NULL);
    }

    uint64_t base = n / (uint64_t)nshards, extra = n % (uint64_t)nshards, first = 0;
    for (int i = 0; i < nshards; i++) {
        uint64_t cnt = base + ((uint64_t)i < extra);
        w_state[i] = W_TEMP; /* before creation: the handler may race with H5Fcreate */
        write_shard(w_tmp[i], prefix, i, nshards, images, labels, first, cnt, n, sha);
        first += cnt;
    }

    /* Rename all or nothing: no signal in between. */
    sigset_t block, saved;
    sigemptyset(&block);
    for (size_t k = 0; k < W_NSIG; k++)
        sigaddset(&block, w_signals[k]);
    sigprocmask(SIG_BLOCK, &block, &saved);
    for (int i = 0; i < nshards; i++) {
        if (rename(w_tmp[i], w_final[i]) != 0) {
            int err = errno;
            w_fail(EX_CANTCREAT, "cannot rename '%s' to '%s': %s", w_tmp[i], w_final[i], strerror(err));
        }
        w_state[i] = W_FINAL;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    for (int i = 0; i < nshards; i++)
        w_state[i] = W_NONE;
    w_n = 0;
    for (size_t k = 0; k < W_NSIG; k++)
        sigaction(w_signals[k], &old[k], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);

    /* Leftovers of an earlier conversion with another shard count would make the set ambiguous. */
    name_entry *v = NULL;
    size_t nv = 0;
    if (scan_dir(dir, prefix, 1, &v, &nv) == 0) {
        for (size_t i = 0; i < nv; i++) {
            if (v[i].count != nshards) {
                char *p = join(dir, v[i].name);
                if (unlink(p) == 0)
                    warn("removed stale shard '%s' (from a conversion into %d shards)", p, v[i].count);
                else
                    warn("cannot remove stale shard '%s': %s", p, strerror(errno));
                free(p);
            }
            free(v[i].name);
        }
        free(v);
    }
    for (int i = 0; i < nshards; i++) {
        free(w_tmp[i]);
        free(w_final[i]);
    }
    free(w_tmp);
    free(w_final);
    free((void *)w_state);
    w_tmp = w_final = NULL;
    w_state = NULL;
}
