/* HDF5 shards: IDX -> shards -> reader round trips, the file layout, serving any number of ranks
 * from any number of shards (sampler + reader), and the real MNIST shards. The reader's bad inputs are
 * in check_shards_bad, the writer's failures and interruptions in check_shards_writer. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/idx.h"
#include "base/rng.h"
#include "data/sampler.h"
#include "data/shards.h"
#include "shards_testutil.h"

/* Compare a read with the expected samples idx[]; plain loops (ck_assert costs a syscall). */
static void expect_samples(const dataset *d, const uint64_t *idx, size_t n, const uint8_t *im, const uint8_t *lb,
                           const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (im && memcmp(im + i * MNIST_PIXELS, d->images + idx[i] * MNIST_PIXELS, MNIST_PIXELS) != 0)
            ck_abort_msg("%s: image %zu (sample %llu) differs", what, i, (unsigned long long)idx[i]);
        if (lb && lb[i] != d->labels[idx[i]])
            ck_abort_msg("%s: label %zu (sample %llu) is %u, expected %u", what, i, (unsigned long long)idx[i], lb[i],
                         d->labels[idx[i]]);
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
static void shard_extents(const char *dir, const char *prefix, int m, const char *sha, uint64_t *first, uint64_t *count)
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
                                memcpy(im + i * MNIST_PIXELS, copy_im[r] + perm[first + i] * MNIST_PIXELS,
                                       MNIST_PIXELS);
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
    return s;
}

int main(void)
{
    error_set_program("check_shards");
    return check_run(shards_suite());
}
