/* HDF5 shards: IDX -> shards -> reader round trips, the file layout, serving any number of ranks
 * from any number of shards (sampler + reader), every bad input of the reader, and the writer's
 * atomicity (no complete-looking file after a failure or an interruption). */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "data_testutil.h"
#include "errors.h"
#include "idx.h"
#include "rng.h"
#include "sampler.h"
#include "shards.h"
#include "../check_run.h"

static char *g_dir; /* created in the parent (unchecked fixture), shared by the forked tests */

static void dir_setup(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    g_dir = tu_mkdtemp("check_shards");
}
static void dir_teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}

/* A fresh subdirectory of g_dir. */
static char *subdir(const char *tag)
{
    static int k;
    char name[128];
    snprintf(name, sizeof name, "%s-%d-%d", tag, (int)getpid(), k++);
    char *p = tu_path(g_dir, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    return p;
}

typedef struct {
    uint64_t n;
    uint8_t *images, *labels;
    char sha[SHA256_HEX_LEN + 1];
} dataset;

/* Synthetic IDX files written and parsed back, as mnist2h5 does. */
static dataset make_data(uint64_t n, uint64_t seed)
{
    dataset d;
    uint8_t *im, *lb;
    tu_synth(n, seed, &im, &lb);
    char *dir = subdir("idx"), *pi = tu_path(dir, "images"), *pl = tu_path(dir, "labels");
    tu_write_idx_images(pi, im, n);
    tu_write_idx_labels(pl, lb, n);
    idx_set set;
    idx_load(pi, pl, &set);
    d.n = set.count;
    d.images = set.images;
    d.labels = set.labels;
    memcpy(d.sha, set.images_sha256, sizeof d.sha);
    free(im);
    free(lb);
    tu_rmrf(dir);
    free(dir);
    free(pi);
    free(pl);
    return d;
}

static void free_data(dataset *d)
{
    free(d->images);
    free(d->labels);
}

/* A written shard set in a fresh directory. */
static char *write_set(const dataset *d, int nshards, const char *prefix)
{
    char *dir = subdir(prefix);
    shards_write(dir, prefix, nshards, d->images, d->labels, d->n, d->sha);
    return dir;
}

static char *shard_path(const char *dir, const char *prefix, int i, int m)
{
    char name[256];
    return tu_path(dir, shards_name(name, sizeof name, prefix, i, m));
}

/* Compare a read with the expected samples idx[]; plain loops (ck_assert costs a syscall). */
static void expect_samples(const dataset *d, const uint64_t *idx, size_t n, const uint8_t *im, const uint8_t *lb,
                           const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (im && memcmp(im + i * MNIST_PIXELS, d->images + idx[i] * MNIST_PIXELS, MNIST_PIXELS) != 0)
            ck_abort_msg("%s: image %zu (sample %llu) differs", what, i, (unsigned long long)idx[i]);
        if (lb && lb[i] != d->labels[idx[i]])
            ck_abort_msg("%s: label %zu (sample %llu) is %u, expected %u", what, i, (unsigned long long)idx[i],
                         lb[i], d->labels[idx[i]]);
    }
}

/* ------------------------------------------------------------------ round trips */

/* The layout straight from the files (no reader): a root attribute of the expected type. */
static uint64_t attr_u64(hid_t f, const char *name, hid_t want_type)
{
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    hid_t t = H5Aget_type(a);
    ck_assert_int_gt(H5Tequal(t, want_type), 0);
    uint64_t v = 0;
    ck_assert_int_ge(H5Aread(a, H5T_NATIVE_UINT64, &v), 0);
    H5Tclose(t);
    H5Aclose(a);
    return v;
}

static void attr_str(hid_t f, const char *name, char *buf, size_t len)
{
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    hid_t t = H5Aget_type(a);
    ck_assert_int_eq(H5Tget_class(t), H5T_STRING);
    size_t sz = H5Tget_size(t);
    ck_assert_uint_lt(sz, len);
    memset(buf, 0, len);
    ck_assert_int_ge(H5Aread(a, t, buf), 0);
    H5Tclose(t);
    H5Aclose(a);
}

/* Each of the m files of a set, straight from HDF5: its first_index, the length of its /images
 * (into first[i], count[i]), and its source_sha256, which must be `sha`. */
static void shard_extents(const char *dir, const char *prefix, int m, const char *sha, uint64_t *first,
                          uint64_t *count)
{
    for (int i = 0; i < m; i++) {
        char *p = shard_path(dir, prefix, i, m), buf[128];
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        first[i] = attr_u64(f, "first_index", H5T_STD_U64LE);
        attr_str(f, "source_sha256", buf, sizeof buf);
        ck_assert_str_eq(buf, sha);
        hid_t ds = H5Dopen2(f, "images", H5P_DEFAULT), sp = H5Dget_space(ds);
        hsize_t dims[3] = {0, 0, 0};
        ck_assert_int_eq(H5Sget_simple_extent_dims(sp, dims, NULL), 3);
        count[i] = dims[0];
        H5Sclose(sp);
        H5Dclose(ds);
        H5Fclose(f);
        free(p);
    }
}

/* Read [a, a + len) over stale buffers (images or labels may be NULL: that dataset is not read) and
 * compare with the data. idx: scratch of len. */
static void check_range(shard_set *s, const dataset *d, uint64_t a, uint64_t len, uint8_t *im, uint8_t *lb,
                        uint64_t *idx)
{
    char what[160];
    for (uint64_t i = 0; i < len; i++)
        idx[i] = a + i;
    if (im)
        memset(im, 0, len * MNIST_PIXELS);
    if (lb)
        memset(lb, 0xff, len);
    shards_read_range(s, a, len, im, lb);
    snprintf(what, sizeof what, "n=%llu shards=%d range [%llu,+%llu)%s", (unsigned long long)d->n, shards_files(s),
             (unsigned long long)a, (unsigned long long)len, im ? (lb ? "" : " images only") : " labels only");
    expect_samples(d, idx, len, im, lb, what);
}

/* Where a range read changes course: both sides of every shard start, of every chunk start inside a
 * shard, and of the end (every position of a tiny set). Marks them in mark[0..n]. */
static void mark_boundaries(uint64_t n, int m, const uint64_t *first, const uint64_t *count, uint8_t *mark)
{
    for (uint64_t g = 0; g <= n; g++)
        mark[g] = n <= 64;
    for (int i = 0; i <= m; i++) {
        uint64_t lo = i < m ? first[i] : n, hi = i < m ? first[i] + count[i] : n + 1;
        for (uint64_t b = lo; b < hi; b += SHARDS_IMAGES_CHUNK)
            for (uint64_t g = b ? b - 1 : 0; g <= b + 1 && g <= n; g++)
                mark[g] = 1;
    }
}

static void roundtrip(uint64_t n, int nshards)
{
    dataset d = make_data(n, (uint64_t)nshards);
    char *dir = write_set(&d, nshards, "train");
    /* Sizes differ by at most one, the first n % M get one more; contiguous first indices. (Before
     * the reader opens the files: HDF5 refuses a second open with other file-locking settings.) */
    uint64_t *first = xmalloc((size_t)nshards * sizeof *first), *count = xmalloc((size_t)nshards * sizeof *count);
    shard_extents(dir, "train", nshards, d.sha, first, count);
    uint64_t next = 0;
    for (int i = 0; i < nshards; i++) {
        uint64_t want = n / (uint64_t)nshards + ((uint64_t)i < n % (uint64_t)nshards);
        ck_assert_uint_eq(count[i], want);
        ck_assert_uint_eq(first[i], next);
        next += want;
    }
    shard_set *s = shards_open(dir, "train");
    ck_assert_int_eq(shards_files(s), nshards);
    ck_assert_uint_eq(shards_total(s), n);
    /* Everything, as one range. */
    uint8_t *im = xmalloc(n * MNIST_PIXELS), *lb = xmalloc(n), *mark = xmalloc(n + 1);
    uint64_t *idx = xmalloc(n * sizeof *idx);
    memset(im, 0xee, n * MNIST_PIXELS);
    shards_read_range(s, 0, n, im, lb);
    ck_assert_int_eq(memcmp(im, d.images, n * MNIST_PIXELS), 0);
    ck_assert_int_eq(memcmp(lb, d.labels, n), 0);
    /* Every range between two positions around shard and chunk boundaries. */
    mark_boundaries(n, nshards, first, count, mark);
    for (uint64_t a = 0; a < n; a++)
        for (uint64_t b = a + 1; mark[a] && b <= n; b++)
            if (mark[b])
                check_range(s, &d, a, b - a, im, lb, idx);
    /* Random ranges, also images only and labels only. */
    uint64_t key = rng_key(n, (uint64_t)nshards);
    for (int t = 0; t < 20; t++) {
        uint64_t a = rng_u64(key, (uint64_t)t) % n, len = 1 + rng_u64(key, 100u + (uint64_t)t) % (n - a);
        check_range(s, &d, a, len, im, lb, idx);
        check_range(s, &d, a, len, im, NULL, idx);
        check_range(s, &d, a, len, NULL, lb, idx);
    }
    shards_read_range(s, 0, 0, im, lb); /* nothing */
    shards_close(s);
    free(im);
    free(lb);
    free(mark);
    free(idx);
    free(first);
    free(count);
    tu_rmrf(dir);
    free(dir);
    free_data(&d);
}

START_TEST(roundtrip_shard_counts)
{
    const int counts[] = {1, 2, 3, 7, 10};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        roundtrip(1000, counts[k]);
}
END_TEST

/* Several chunks per shard (1024 images a chunk), sizes not multiples of anything. */
START_TEST(roundtrip_multi_chunk)
{
    roundtrip(2500, 1);
    roundtrip(5003, 3);
}
END_TEST

/* As many shards as samples, and tiny sets. */
START_TEST(roundtrip_tiny)
{
    roundtrip(1, 1);
    roundtrip(7, 7);
    roundtrip(9, 4);
}
END_TEST

/* ------------------------------------------------------------------ layout */

/* Each file on its own (no reader): datasets, types, shapes, chunks, Fletcher-32, attributes, and
 * concatenating the shards in order gives back the IDX order. */
START_TEST(layout)
{
    const uint64_t n = 2051;
    const int m = 3;
    dataset d = make_data(n, 11);
    char *dir = write_set(&d, m, "test");
    uint64_t first = 0;
    for (int i = 0; i < m; i++) {
        char *p = shard_path(dir, "test", i, m), buf[128];
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        uint64_t cnt = n / m + ((uint64_t)i < n % m);
        ck_assert_uint_eq(attr_u64(f, "shard_index", H5T_STD_U32LE), (uint64_t)i);
        ck_assert_uint_eq(attr_u64(f, "shard_count", H5T_STD_U32LE), (uint64_t)m);
        ck_assert_uint_eq(attr_u64(f, "total_samples", H5T_STD_U64LE), n);
        ck_assert_uint_eq(attr_u64(f, "first_index", H5T_STD_U64LE), first);
        ck_assert_uint_eq(attr_u64(f, "num_samples", H5T_STD_U64LE), cnt);
        attr_str(f, "prefix", buf, sizeof buf);
        ck_assert_str_eq(buf, "test");
        attr_str(f, "source_sha256", buf, sizeof buf);
        ck_assert_str_eq(buf, d.sha);
        const char *names[2] = {"images", "labels"};
        for (int k = 0; k < 2; k++) {
            hid_t ds = H5Dopen2(f, names[k], H5P_DEFAULT);
            ck_assert_int_ge(ds, 0);
            hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds), dcpl = H5Dget_create_plist(ds);
            ck_assert_int_gt(H5Tequal(t, H5T_STD_U8LE), 0);
            hsize_t dims[3] = {0, 0, 0}, chunk[3] = {0, 0, 0};
            int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
            ck_assert_int_eq(nd, k ? 1 : 3);
            ck_assert_uint_eq(dims[0], cnt);
            if (!k) {
                ck_assert_uint_eq(dims[1], 28);
                ck_assert_uint_eq(dims[2], 28);
            }
            ck_assert_int_eq(H5Pget_layout(dcpl), H5D_CHUNKED);
            ck_assert_int_eq(H5Pget_chunk(dcpl, 3, chunk), nd);
            ck_assert_uint_eq(chunk[0], k ? (cnt < SHARDS_LABELS_CHUNK ? cnt : SHARDS_LABELS_CHUNK)
                                          : (cnt < SHARDS_IMAGES_CHUNK ? cnt : SHARDS_IMAGES_CHUNK));
            unsigned flags;
            size_t nelmts = 0;
            ck_assert_int_ge(H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &nelmts, NULL, 0, NULL, NULL),
                             0);
            /* The shard's bytes are the IDX bytes [first, first + cnt). */
            size_t sz = (size_t)cnt * (k ? 1 : MNIST_PIXELS);
            uint8_t *buf2 = xmalloc(sz);
            ck_assert_int_ge(H5Dread(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf2), 0);
            ck_assert_int_eq(memcmp(buf2, k ? d.labels + first : d.images + first * MNIST_PIXELS, sz), 0);
            free(buf2);
            H5Pclose(dcpl);
            H5Sclose(sp);
            H5Tclose(t);
            H5Dclose(ds);
        }
        H5Fclose(f);
        first += cnt;
        free(p);
    }
    ck_assert_uint_eq(first, n);
    /* Nothing else in the directory but the manifest: no temporaries left. */
    ck_assert_int_eq(tu_count(dir, NULL), m + 1);
    tu_rmrf(dir);
    free(dir);
    free_data(&d);
}
END_TEST

/* Train and test sets side by side in one directory; rewriting with another shard count replaces
 * the old set (no stale files that would make the set ambiguous). */
START_TEST(two_prefixes_and_rewrite)
{
    dataset d = make_data(300, 3), t = make_data(50, 4);
    char *dir = subdir("mixed");
    shards_write(dir, "train", 3, d.images, d.labels, d.n, d.sha);
    shards_write(dir, "test", 1, t.images, t.labels, t.n, t.sha);
    shard_set *s = shards_open(dir, "train"), *u = shards_open(dir, "test");
    ck_assert_uint_eq(shards_total(s), 300);
    ck_assert_uint_eq(shards_total(u), 50);
    shards_close(s);
    shards_close(u);
    shards_write(dir, "train", 2, d.images, d.labels, d.n, d.sha);
    s = shards_open(dir, "train");
    ck_assert_int_eq(shards_files(s), 2);
    shards_close(s);
    ck_assert_int_eq(tu_count(dir, NULL), 5); /* 2 + 1 shards, 2 manifests */
    tu_rmrf(dir);
    free(dir);
    free_data(&d);
    free_data(&t);
}
END_TEST

/* ------------------------------------------------------------------ ranks x shards */

#define MAX_WORLD 16

/* Each of `world` ranks opens the set itself and reads through the range reader what the trainer
 * reads: a contiguous share (rank r of world: [r*n/world, (r+1)*n/world)), then the whole set into
 * copy_*[r]; both must be the expected bytes. */
static void rank_reads(const dataset *d, const char *dir, int world, uint8_t **copy_im, uint8_t **copy_lb)
{
    const uint64_t n = d->n;
    uint64_t *idx = xmalloc(n * sizeof *idx);
    for (int r = 0; r < world; r++) {
        shard_set *s = shards_open(dir, "train");
        uint64_t lo = n * (uint64_t)r / (uint64_t)world, hi = n * (uint64_t)(r + 1) / (uint64_t)world;
        check_range(s, d, lo, hi - lo, copy_im[r], copy_lb[r], idx);
        check_range(s, d, 0, n, copy_im[r], copy_lb[r], idx);
        shards_close(s);
    }
    free(idx);
}

/* For many (shards, ranks, batch): every rank reads its share and the whole set (rank_reads), then
 * takes its sampler slices from the copy it read, as the trainer does; what it gets must be the
 * expected bytes, and over the epoch the ranks together see every sample exactly once, with equal
 * step counts. Includes more ranks than shards and more shards than ranks. */
START_TEST(ranks_by_shards)
{
    const uint64_t n = 203;
    dataset d = make_data(n, 5);
    const int shard_counts[] = {1, 2, 3, 5, 8};
    const int worlds[] = {1, 2, 3, 4, 7, MAX_WORLD};
    const int batches[] = {1, 4, 32};
    uint64_t *perm = xmalloc(n * sizeof *perm);
    unsigned *seen = xmalloc(n * sizeof *seen);
    uint8_t *im = xmalloc(n * MNIST_PIXELS), *lb = xmalloc(n), *copy_im[MAX_WORLD], *copy_lb[MAX_WORLD];
    for (int r = 0; r < MAX_WORLD; r++) {
        copy_im[r] = xmalloc(n * MNIST_PIXELS);
        copy_lb[r] = xmalloc(n);
    }
    for (size_t a = 0; a < sizeof shard_counts / sizeof *shard_counts; a++) {
        char *dir = write_set(&d, shard_counts[a], "train");
        for (size_t b = 0; b < sizeof worlds / sizeof *worlds; b++) {
            int world = worlds[b];
            rank_reads(&d, dir, world, copy_im, copy_lb);
            for (size_t c = 0; c < sizeof batches / sizeof *batches; c++) {
                int batch = batches[c];
                for (uint64_t epoch = 0; epoch < 2; epoch++) {
                    char what[160];
                    memset(seen, 0, n * sizeof *seen);
                    sampler_permutation(17, epoch, n, perm);
                    uint64_t steps = sampler_steps(n, world, batch);
                    for (int r = 0; r < world; r++) {
                        uint64_t taken = 0;
                        for (uint64_t st = 0; st < steps; st++, taken++) {
                            uint64_t first, count, gc;
                            sampler_slice(n, world, batch, r, st, &first, &count, &gc);
                            for (uint64_t i = 0; i < count; i++) {
                                memcpy(im + i * MNIST_PIXELS, copy_im[r] + perm[first + i] * MNIST_PIXELS, MNIST_PIXELS);
                                lb[i] = copy_lb[r][perm[first + i]];
                            }
                            snprintf(what, sizeof what, "shards=%d world=%d batch=%d epoch=%llu rank=%d step=%llu",
                                     shard_counts[a], world, batch, (unsigned long long)epoch, r,
                                     (unsigned long long)st);
                            expect_samples(&d, perm + first, count, im, lb, what);
                            for (uint64_t i = 0; i < count; i++)
                                seen[perm[first + i]]++;
                        }
                        ck_assert_uint_eq(taken, steps);
                    }
                    for (uint64_t i = 0; i < n; i++)
                        if (seen[i] != 1)
                            ck_abort_msg("shards=%d world=%d batch=%d: sample %llu seen %u times", shard_counts[a],
                                         world, batch, (unsigned long long)i, seen[i]);
                }
            }
        }
        tu_rmrf(dir);
        free(dir);
    }
    for (int r = 0; r < MAX_WORLD; r++) {
        free(copy_im[r]);
        free(copy_lb[r]);
    }
    free(perm);
    free(seen);
    free(im);
    free(lb);
    free_data(&d);
}
END_TEST

/* ------------------------------------------------------------------ the real (or MNIST-like) data */

static void check_first_labels(const char *dir, const char *prefix, uint64_t total, const uint8_t want[10])
{
    shard_set *s = shards_open(dir, prefix);
    ck_assert_uint_eq(shards_total(s), total);
    uint8_t lb[10], im[10 * MNIST_PIXELS];
    shards_read_range(s, 0, 10, im, lb);
    ck_assert_int_eq(memcmp(lb, want, 10), 0);
    /* and one at a time, labels only, last first */
    for (int i = 9; i >= 0; i--) {
        uint8_t one = 0xff;
        shards_read_range(s, (uint64_t)i, 1, NULL, &one);
        ck_assert_uint_eq(one, want[i]);
    }
    shards_close(s);
}

/* SHA-256 of the original train-images-idx3-ubyte (../shared/reference/mnist.sha256, data/mnist.sha256). */
#define MNIST_TRAIN_SHA256 "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"

START_TEST(first_labels)
{
    static const uint8_t train[10] = {5, 0, 4, 1, 9, 2, 1, 3, 1, 4}, test[10] = {7, 2, 1, 0, 4, 1, 4, 9, 5, 9};
    /* make check prepares the real shards first: missing ones are a broken set-up, not a reason to pass. */
    const char *real = tu_env("MNIST_DATA");
    char *probe = real ? shard_path(real, "test", 0, 1) : NULL;
    ck_assert_msg(probe && access(probe, R_OK) == 0, "no MNIST shards in $MNIST_DATA (%s): run 'make data'",
                  real ? real : "unset");
    shard_set *s = shards_open(real, "train");
    int m = shards_files(s);
    ck_assert_str_eq(shards_source_sha256(s), MNIST_TRAIN_SHA256);
    shards_close(s);
    uint64_t *first = xmalloc((size_t)m * sizeof *first), *count = xmalloc((size_t)m * sizeof *count);
    shard_extents(real, "train", m, MNIST_TRAIN_SHA256, first, count);
    free(first);
    free(count);
    check_first_labels(real, "train", 60000, train);
    check_first_labels(real, "test", 10000, test);
    free(probe);
}
END_TEST

/* ------------------------------------------------------------------ bad inputs (reader) */

/* A good 3-shard set of 300 samples in a fresh directory; the case then damages it. Without its
 * manifest, like a set written by another tool: these cases check what the reader finds in the files
 * themselves (check_manifest has the manifest's cases). */
static char *good_set(void)
{
    dataset d = make_data(300, 21);
    char *dir = write_set(&d, 3, "train"), *mf = tu_path(dir, "train.manifest");
    ck_assert_int_eq(remove(mf), 0);
    free(mf);
    free_data(&d);
    return dir;
}

/* The error line of a run on good_set(), after the warning that its set is unverified (absent when
 * the reader stopped before looking for the manifest). */
static const char *error_line(const char *err)
{
    static const char warning[] = "check_shards: warning: shard set ";
    if (strncmp(err, warning, sizeof warning - 1) != 0)
        return err;
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && strstr(err, "has no manifest") && strstr(err, "not verified"), "unexpected warning: %s", err);
    return nl + 1;
}

static void open_and_read_all(const char *dir)
{
    shard_set *s = shards_open(dir, "train");
    uint64_t n = shards_total(s);
    uint8_t *im = xmalloc(n * MNIST_PIXELS), *lb = xmalloc(n);
    shards_read_range(s, 0, n, im, lb);
    shards_close(s);
    free(im);
    free(lb);
}

/* Replace dataset `name` of shard i with one of another type or shape. */
static void replace_dataset(const char *dir, int i, const char *name, hid_t type, int rank, const hsize_t *dims)
{
    char *p = shard_path(dir, "train", i, 3);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_ge(H5Ldelete(f, name, H5P_DEFAULT), 0);
    if (type >= 0) {
        hid_t sp = H5Screate_simple(rank, dims, NULL);
        hid_t ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert_int_ge(ds, 0);
        H5Dclose(ds);
        H5Sclose(sp);
    }
    H5Fclose(f);
    free(p);
}

static void set_attr_u64(const char *path, const char *name, uint64_t v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_UINT64, &v), 0);
    H5Aclose(a);
    H5Fclose(f);
}

typedef struct {
    const char *name;
    int code;
    const char *keyword;  /* in the message */
    const char *file;     /* the file the message must name (shard index), or NULL */
} reader_case;

static const reader_case reader_cases[] = {
    {"not-hdf5", EX_DATAERR, "not a readable HDF5 file", "train-00001-of-00003.h5"},
    {"missing-dataset", EX_DATAERR, "has no /labels dataset", "train-00002-of-00003.h5"},
    {"wrong-dtype-images", EX_DATAERR, "/images has type float32, expected uint8", "train-00000-of-00003.h5"},
    {"wrong-dtype-labels", EX_DATAERR, "/labels has type int16, expected uint8", "train-00001-of-00003.h5"},
    {"wrong-shape-flat", EX_DATAERR, "/images has shape [100,784], expected [n,28,28]", "train-00001-of-00003.h5"},
    {"wrong-shape-labels", EX_DATAERR, "/labels has shape [99]", "train-00000-of-00003.h5"},
    {"gap", EX_NOINPUT, "'train-00001-of-00003.h5' is missing", NULL},
    {"extra-index", EX_DATAERR, "extra shard", "train-00003-of-00003.h5"},
    {"extra-set", EX_DATAERR, "disagree on the shard count", "train-00000-of-00002.h5"},
    {"duplicate", EX_DATAERR, "duplicated or renamed", "train-00002-of-00003.h5"},
    {"first-index-gap", EX_DATAERR, "gap or overlap", "train-00001-of-00003.h5"},
    {"total-mismatch", EX_DATAERR, "total_samples", "train-00001-of-00003.h5"},
    {"missing-attribute", EX_DATAERR, "lacks the root attribute first_index", "train-00000-of-00003.h5"},
    {"other-prefix", EX_DATAERR, "written with prefix 'test'", "train-00000-of-00003.h5"},
    {"non-canonical-name", EX_DATAERR, "unexpected file", "train-1-of-3.h5"},
    {"empty-dir", EX_NOINPUT, "no shard files", NULL},
    {"no-dir", EX_NOINPUT, "cannot open shard directory", NULL},
    {"corrupt-chunk", EX_DATAERR, "Fletcher-32 checksum mismatch", "train-00001-of-00003.h5"},
    {"label-out-of-range", EX_DATAERR, "label 12 of sample 107", "train-00001-of-00003.h5"},
};
#define NREADER (int)(sizeof reader_cases / sizeof *reader_cases)

/* Flip a byte inside the raw data of the first /images chunk of shard 1, found with
 * H5Dget_chunk_info (and confirmed by the known bytes written there). */
static void corrupt_chunk(const char *dir)
{
    char *p = shard_path(dir, "train", 1, 3);
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "images", H5P_DEFAULT);
    hsize_t nchunks = 0, off[3], size = 0;
    haddr_t addr = 0;
    unsigned mask = 0;
    hid_t fs = H5Dget_space(ds);
    ck_assert_int_ge(H5Dget_num_chunks(ds, fs, &nchunks), 0);
    ck_assert_uint_eq(nchunks, 1);
    ck_assert_int_ge(H5Dget_chunk_info(ds, fs, 0, off, &mask, &addr, &size), 0);
    H5Sclose(fs);
    ck_assert_uint_eq(size, 100 * MNIST_PIXELS + 4); /* data + Fletcher-32 checksum */
    H5Dclose(ds);
    H5Fclose(f);
    FILE *fp = fopen(p, "r+b");
    ck_assert_ptr_nonnull(fp);
    uint8_t b[4];
    /* sample 100 is the first of shard 1: its first 4 bytes encode its index (tu_synth) */
    ck_assert_int_eq(fseek(fp, (long)addr, SEEK_SET), 0);
    ck_assert_uint_eq(fread(b, 1, 4, fp), 4);
    ck_assert_uint_eq(b[3], 100);
    ck_assert_int_eq(fseek(fp, (long)addr + 7 * MNIST_PIXELS + 300, SEEK_SET), 0);
    ck_assert_uint_eq(fread(b, 1, 1, fp), 1);
    b[0] ^= 0x01;
    ck_assert_int_eq(fseek(fp, (long)addr + 7 * MNIST_PIXELS + 300, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(b, 1, 1, fp), 1);
    fclose(fp);
    free(p);
}

/* Write a label of 12 at local index 7 of shard 1 (global 107), through HDF5 (valid checksum). */
static void bad_label(const char *dir)
{
    char *p = shard_path(dir, "train", 1, 3);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "labels", H5P_DEFAULT);
    hid_t fs = H5Dget_space(ds);
    hsize_t start = 7, one = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    uint8_t v = 12;
    ck_assert_int_ge(H5Dwrite(ds, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, &v), 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    H5Fclose(f);
    free(p);
}

static void damage(const reader_case *c, const char *dir)
{
    const char *n = c->name;
    hsize_t d2[2] = {100, 784}, d1[1] = {99}, d3[3] = {100, 28, 28};
    if (!strcmp(n, "not-hdf5")) {
        char *p = shard_path(dir, "train", 1, 3);
        tu_write_file(p, "this is not an HDF5 file\n", 25);
        free(p);
    } else if (!strcmp(n, "missing-dataset")) {
        replace_dataset(dir, 2, "labels", -1, 0, NULL);
    } else if (!strcmp(n, "wrong-dtype-images")) {
        replace_dataset(dir, 0, "images", H5T_IEEE_F32LE, 3, d3);
    } else if (!strcmp(n, "wrong-dtype-labels")) {
        replace_dataset(dir, 1, "labels", H5T_STD_I16LE, 1, d1 /* shape checked after type */);
    } else if (!strcmp(n, "wrong-shape-flat")) {
        replace_dataset(dir, 1, "images", H5T_STD_U8LE, 2, d2);
    } else if (!strcmp(n, "wrong-shape-labels")) {
        replace_dataset(dir, 0, "labels", H5T_STD_U8LE, 1, d1);
    } else if (!strcmp(n, "gap")) {
        char *p = shard_path(dir, "train", 1, 3);
        remove(p);
        free(p);
    } else if (!strcmp(n, "extra-index")) {
        char *a = shard_path(dir, "train", 2, 3), *b = shard_path(dir, "train", 3, 3);
        tu_copy_file(a, b);
        free(a);
        free(b);
    } else if (!strcmp(n, "extra-set")) {
        char *a = shard_path(dir, "train", 0, 3), *b = shard_path(dir, "train", 0, 2);
        tu_copy_file(a, b);
        free(a);
        free(b);
    } else if (!strcmp(n, "duplicate")) {
        char *a = shard_path(dir, "train", 1, 3), *b = shard_path(dir, "train", 2, 3);
        tu_copy_file(a, b);
        free(a);
        free(b);
    } else if (!strcmp(n, "first-index-gap")) {
        char *p = shard_path(dir, "train", 1, 3);
        set_attr_u64(p, "first_index", 101);
        free(p);
    } else if (!strcmp(n, "total-mismatch")) {
        char *p = shard_path(dir, "train", 1, 3);
        set_attr_u64(p, "total_samples", 301);
        free(p);
    } else if (!strcmp(n, "missing-attribute")) {
        char *p = shard_path(dir, "train", 0, 3);
        hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
        ck_assert_int_ge(H5Adelete(f, "first_index"), 0);
        H5Fclose(f);
        free(p);
    } else if (!strcmp(n, "other-prefix")) {
        /* A test set renamed into the train set. */
        dataset d = make_data(300, 21);
        char *tdir = subdir("renamed");
        shards_write(tdir, "test", 3, d.images, d.labels, d.n, d.sha);
        for (int i = 0; i < 3; i++) {
            char *a = shard_path(tdir, "test", i, 3), *b = shard_path(dir, "train", i, 3);
            rename(a, b);
            free(a);
            free(b);
        }
        tu_rmrf(tdir);
        free(tdir);
        free_data(&d);
    } else if (!strcmp(n, "non-canonical-name")) {
        char *a = shard_path(dir, "train", 1, 3), *b = tu_path(dir, "train-1-of-3.h5");
        tu_copy_file(a, b);
        free(a);
        free(b);
    } else if (!strcmp(n, "empty-dir")) {
        tu_rmrf(dir);
        mkdir(dir, 0755);
    } else if (!strcmp(n, "no-dir")) {
        tu_rmrf(dir);
    } else if (!strcmp(n, "corrupt-chunk")) {
        corrupt_chunk(dir);
    } else if (!strcmp(n, "label-out-of-range")) {
        bad_label(dir);
    } else {
        ck_abort_msg("unknown case %s", n);
    }
}

/* Damage a good set, then open and read it all: must die with the case's code. */
START_TEST(reader_bad_exit)
{
    const reader_case *c = &reader_cases[_i];
    char *dir = good_set();
    damage(c, dir);
    open_and_read_all(dir);
}
END_TEST

typedef struct {
    const reader_case *c;
    const char *dir;
} case_arg;

static void open_and_read_fn(void *arg) { open_and_read_all(((case_arg *)arg)->dir); }

/* The same cases in a child with stderr captured: code, one line, the problem, the file. */
START_TEST(reader_bad_messages)
{
    for (int k = 0; k < NREADER; k++) {
        const reader_case *c = &reader_cases[k];
        char *dir = good_set(), err[4096];
        damage(c, dir);
        case_arg a = {c, dir};
        int code = tu_run(open_and_read_fn, &a, err, sizeof err);
        const char *line = error_line(err);
        ck_assert_msg(code == c->code, "%s: exit %d, expected %d (%s)", c->name, code, c->code, err);
        ck_assert_msg(strstr(err, c->keyword) != NULL, "%s: message lacks '%s': %s", c->name, c->keyword, err);
        if (c->file)
            ck_assert_msg(strstr(err, c->file) != NULL, "%s: message does not name %s: %s", c->name, c->file, err);
        ck_assert_msg(strncmp(line, "check_shards: error: ", 21) == 0, "%s: not a die() line: %s", c->name, err);
        ck_assert_msg(strchr(line, '\n') == line + strlen(line) - 1, "%s: not one line: %s", c->name, err);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

/* Damage found only when the data is read: what does not touch it still works. */
START_TEST(damage_is_local)
{
    char *dir = good_set();
    corrupt_chunk(dir);
    shard_set *s = shards_open(dir, "train");
    uint8_t *im = xmalloc(200 * MNIST_PIXELS), *lb = xmalloc(200);
    shards_read_range(s, 0, 50, im, lb);  /* shard 0 */
    shards_read_range(s, 200, 50, im, lb); /* shard 2 */
    shards_read_range(s, 100, 100, NULL, lb); /* shard 1 labels: another dataset */
    shards_close(s);
    tu_rmrf(dir);
    free(dir);
    dir = good_set();
    bad_label(dir);
    s = shards_open(dir, "train");
    shards_read_range(s, 0, 107, im, lb);   /* up to the bad label 107 */
    shards_read_range(s, 108, 192, im, lb); /* and after it */
    shards_close(s);
    tu_rmrf(dir);
    free(dir);
    free(im);
    free(lb);
}
END_TEST

/* A small read of one dataset (a few labels, one image) hits the bad label / bad chunk too. */
START_TEST(damage_in_small_range_bad_label)
{
    char *dir = good_set();
    bad_label(dir);
    shard_set *s = shards_open(dir, "train");
    uint8_t lb[3];
    shards_read_range(s, 105, 3, NULL, lb);
}
END_TEST

START_TEST(damage_in_small_range_bad_chunk)
{
    char *dir = good_set();
    corrupt_chunk(dir);
    shard_set *s = shards_open(dir, "train");
    uint8_t im[MNIST_PIXELS];
    shards_read_range(s, 150, 1, im, NULL);
}
END_TEST

/* A range that ends past the last sample. */
START_TEST(range_out_of_range)
{
    char *dir = good_set();
    shard_set *s = shards_open(dir, "train");
    uint8_t lb[2];
    shards_read_range(s, 299, 2, NULL, lb);
}
END_TEST

/* ------------------------------------------------------------------ the writer */

typedef struct {
    const char *dir;
    const char *prefix;
    int nshards;
    int bad_label;
} write_arg;

static void write_fn(void *arg)
{
    write_arg *w = arg;
    dataset d = make_data(120, 2);
    if (w->bad_label)
        d.labels[77] = 10;
    shards_write(w->dir, w->prefix, w->nshards, d.images, d.labels, d.n, d.sha);
    free_data(&d);
}

/* Unwritable output: a path under a regular file, and one under /proc (root is not stopped by
 * permissions, these fail for everyone). */
START_TEST(writer_unwritable_exit)
{
    char *file = tu_path(g_dir, "a-regular-file"), *under = tu_path(file, "out");
    tu_write_file(file, "x", 1);
    write_arg w = {under, "train", 2, 0};
    write_fn(&w);
}
END_TEST

START_TEST(writer_unwritable)
{
    char *file = tu_path(g_dir, "regular-file-2"), *under = tu_path(file, "out/deeper"), err[2048];
    tu_write_file(file, "x", 1);
    write_arg w = {under, "train", 2, 0};
    ck_assert_int_eq(tu_run(write_fn, &w, err, sizeof err), EX_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(err, "regular-file-2/out/deeper"));
    write_arg p = {"/proc/mnist_ddp_check_shards/out", "train", 2, 0};
    ck_assert_int_eq(tu_run(write_fn, &p, err, sizeof err), EX_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(err, "/proc/mnist_ddp_check_shards/out"));
    free(file);
    free(under);
}
END_TEST

/* Bad arguments: nothing is created. */
START_TEST(writer_bad_arguments)
{
    char *dir = subdir("badargs"), err[2048];
    write_arg cases[] = {
        {dir, "train", 0, 0}, {dir, "train", 121, 0}, {dir, "../evil", 2, 0}, {dir, ".hidden", 2, 0},
        {dir, "", 2, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        ck_assert_int_eq(tu_run(write_fn, &cases[k], err, sizeof err), EX_USAGE);
    write_arg lab = {dir, "train", 3, 1};
    ck_assert_int_eq(tu_run(write_fn, &lab, err, sizeof err), EX_DATAERR);
    ck_assert_ptr_nonnull(strstr(err, "label 10 of sample 77"));
    ck_assert_int_eq(tu_count(dir, NULL), 0);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* A failure after some shards are complete (the final name of shard 1 is taken by a directory,
 * so its rename fails): exit 73, no temporaries left, and no file that looks like a shard. */
START_TEST(writer_failure_leaves_nothing)
{
    char *dir = subdir("failmid"), *block = shard_path(dir, "train", 1, 3), err[2048], list[4096];
    ck_assert_int_eq(mkdir(block, 0755), 0);
    char *inside = tu_path(block, "keep");
    tu_write_file(inside, "x", 1);
    write_arg w = {dir, "train", 3, 0};
    ck_assert_int_eq(tu_run(write_fn, &w, err, sizeof err), EX_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(err, "cannot rename"));
    tu_listdir(dir, list, sizeof list);
    ck_assert_str_eq(list, "train-00001-of-00003.h5"); /* only the blocking directory */
    free(inside);
    free(block);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* The same as an exit test (the process dies with 73). */
START_TEST(writer_failure_exit)
{
    char *dir = subdir("failexit"), *block = shard_path(dir, "train", 2, 3), *inside = tu_path(block, "x");
    mkdir(block, 0755);
    tu_write_file(inside, "x", 1);
    write_arg w = {dir, "train", 3, 0};
    write_fn(&w);
}
END_TEST

/* ... and the directory it left has no shard-looking file or temporary (runs after the exit test). */
START_TEST(writer_failure_exit_aftermath)
{
    char list[8192];
    /* every failexit-* directory under g_dir holds only the blocking directory */
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "failexit-", 9) != 0)
            continue;
        char *p = tu_path(g_dir, e->d_name);
        tu_listdir(p, list, sizeof list);
        ck_assert_str_eq(list, "train-00002-of-00003.h5");
        free(p);
        seen++;
    }
    closedir(d);
    ck_assert_int_eq(seen, 1);
}
END_TEST

/* Interrupted writers: killed at various moments of shards_write with SIGTERM or SIGINT (handled:
 * temporaries removed) or SIGKILL (not catchable: temporaries may stay, hidden). Either way the
 * directory holds a complete set or no shard file at all, and a reader either opens the complete
 * set or finds none. The child prepares its data first and reports through a pipe when it starts
 * writing; the kill times are fractions of a measured uninterrupted write. */
static pid_t start_writer(const dataset *d, const char *dir, int *ready_fd)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* not Check's handlers, which kill the whole process group */
        signal(SIGTERM, SIG_DFL);
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 2);
        close(fd[0]);
        if (write(fd[1], "w", 1) != 1)
            _exit(98);
        shards_write(dir, "train", 8, d->images, d->labels, d->n, d->sha);
        _exit(0);
    }
    close(fd[1]);
    char c;
    ck_assert_int_eq(read(fd[0], &c, 1), 1); /* writing starts now */
    *ready_fd = fd[0];
    return pid;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void open_fn(void *arg)
{
    shard_set *s = shards_open(arg, "train");
    if (shards_total(s) != 40000 || shards_files(s) != 8)
        _exit(99);
    shards_close(s);
}

START_TEST(writer_interrupted)
{
    /* An uninterrupted write, timed. */
    dataset d = make_data(40000, 6);
    char *dir = subdir("interrupt"), err[2048], list[4096];
    int fd, st;
    pid_t pid = start_writer(&d, dir, &fd);
    double t0 = now_s();
    waitpid(pid, &st, 0);
    double tw = now_s() - t0;
    close(fd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uninterrupted writer failed");
    ck_assert_int_eq(tu_count(dir, NULL), 9); /* and the manifest */
    tu_rmrf(dir);
    free(dir);

    const int sigs[] = {SIGTERM, SIGINT, SIGKILL};
    const double fractions[] = {0, 0.05, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 1.0, 1.1, 2.0};
    int complete = 0, empty = 0;
    for (size_t a = 0; a < sizeof sigs / sizeof *sigs; a++)
        for (size_t b = 0; b < sizeof fractions / sizeof *fractions; b++) {
            dir = subdir("interrupt");
            pid = start_writer(&d, dir, &fd);
            long us = (long)(fractions[b] * tw * 1e6);
            struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
            nanosleep(&ts, NULL);
            kill(pid, sigs[a]);
            waitpid(pid, &st, 0);
            close(fd);
            int tmps = tu_count(dir, ".tmp.");
            int shards = tu_count(dir, "-of-00008.h5") - tmps;
            tu_listdir(dir, list, sizeof list);
            /* A caught signal leaves all or nothing. SIGKILL cannot be caught: landing inside the rename loop it
             * leaves part of the set, which must never look complete (the reader refuses it, below). */
            if (sigs[a] != SIGKILL) {
                ck_assert_msg(shards == 0 || shards == 8, "signal %d at %.2f of the write: %d shard files: %s",
                              sigs[a], fractions[b], shards, list);
                ck_assert_msg(tmps == 0, "signal %d at %.2f of the write: temporaries left: %s", sigs[a],
                              fractions[b], list);
            }
            int code = tu_run(open_fn, dir, err, sizeof err);
            if (shards == 8) {
                ck_assert_int_eq(code, 0);
                complete++;
            } else {
                ck_assert_int_eq(code, EX_NOINPUT);
                empty++;
            }
            tu_rmrf(dir);
            free(dir);
        }
    fprintf(stderr, "check_shards: interrupted writers (write takes %.3f s): %d left a complete set, %d none or "
            "a refused part\n", tw, complete, empty);
    free_data(&d);
}
END_TEST

static Suite *shards_suite(void)
{
    Suite *s = suite_create("shards");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, roundtrip_shard_counts);
    tcase_add_test(tc, roundtrip_multi_chunk);
    tcase_add_test(tc, roundtrip_tiny);
    tcase_add_test(tc, layout);
    tcase_add_test(tc, two_prefixes_and_rewrite);
    tcase_add_test(tc, ranks_by_shards);
    tcase_add_test(tc, first_labels);
    suite_add_tcase(s, tc);

    tc = tcase_create("reader-bad");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_set_timeout(tc, 120);
    for (int k = 0; k < NREADER; k++)
        tcase_add_loop_exit_test(tc, reader_bad_exit, reader_cases[k].code, k, k + 1);
    tcase_add_test(tc, reader_bad_messages);
    tcase_add_test(tc, damage_is_local);
    tcase_add_exit_test(tc, damage_in_small_range_bad_label, EX_DATAERR);
    tcase_add_exit_test(tc, damage_in_small_range_bad_chunk, EX_DATAERR);
    tcase_add_exit_test(tc, range_out_of_range, EX_SOFTWARE);
    suite_add_tcase(s, tc);

    tc = tcase_create("writer");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_exit_test(tc, writer_unwritable_exit, EX_CANTCREAT);
    tcase_add_test(tc, writer_unwritable);
    tcase_add_test(tc, writer_bad_arguments);
    tcase_add_test(tc, writer_failure_leaves_nothing);
    tcase_add_exit_test(tc, writer_failure_exit, EX_CANTCREAT);
    tcase_add_test(tc, writer_failure_exit_aftermath);
    tcase_add_test(tc, writer_interrupted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_shards");
    return check_run(shards_suite());
}
