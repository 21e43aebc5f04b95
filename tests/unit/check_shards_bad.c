/* HDF5 shards, every bad input of the reader: damaged, missing, extra and foreign files, each refused
 * with its exit code and a one-line message naming the file; damage in the data found only where it is
 * read. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/idx.h"
#include "data/shards.h"
#include "shards_testutil.h"

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
    static const char warning[] = "check_shards_bad: warning: shard set ";
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
    const char *keyword; /* in the message */
    const char *file;    /* the file the message must name (shard index), or NULL */
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

/* Copies train shard A of AN onto shard B of BN. */
static void copy_shard(const char *dir, int a, int an, int b, int bn)
{
    char *pa = shard_path(dir, "train", a, an), *pb = shard_path(dir, "train", b, bn);
    tu_copy_file(pa, pb);
    free(pa);
    free(pb);
}

/* Sets attribute NAME of train shard 1 of 3. */
static void set_shard_attr(const char *dir, const char *name, uint64_t v)
{
    char *p = shard_path(dir, "train", 1, 3);
    set_attr_u64(p, name, v);
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
        copy_shard(dir, 2, 3, 3, 3);
    } else if (!strcmp(n, "extra-set")) {
        copy_shard(dir, 0, 3, 0, 2);
    } else if (!strcmp(n, "duplicate")) {
        copy_shard(dir, 1, 3, 2, 3);
    } else if (!strcmp(n, "first-index-gap")) {
        set_shard_attr(dir, "first_index", 101);
    } else if (!strcmp(n, "total-mismatch")) {
        set_shard_attr(dir, "total_samples", 301);
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
        ck_assert_msg(strncmp(line, "check_shards_bad: error: ", 25) == 0, "%s: not a die() line: %s", c->name, err);
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
    shards_read_range(s, 0, 50, im, lb);      /* shard 0 */
    shards_read_range(s, 200, 50, im, lb);    /* shard 2 */
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

static Suite *shards_bad_suite(void)
{
    Suite *s = suite_create("shards-bad");
    TCase *tc = tcase_create("reader-bad");
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
    return s;
}

int main(void)
{
    error_set_program("check_shards_bad");
    return check_run(shards_bad_suite());
}
