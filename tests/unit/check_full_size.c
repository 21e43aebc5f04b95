/* The data layer's scans fed full-size inputs with the damage at their END, and its digest comparisons fed
 * values that differ in their LAST hex digit only (issue 33). The other suites' inputs are small and their
 * damage early or whole (a bad label at index 7, a flipped byte that changes the whole digest), so a
 * scan cut to its first few thousand values, or a comparison cut to its first bytes, passed them:
 * - idx_read_labels: the label range over all 60,000 labels, the bad one last;
 * - shards_write: the same scan before anything is written;
 * - the shard reader's label check (check_labels) on a whole 60,000-sample shard read in one range;
 * - manifest_verify: every shard of the set (the last one damaged), every byte of a shard larger than
 *   8 MiB (its last byte flipped), and the stored digest compared in full (it differs in its last digit);
 * - the manifest's source digest against the shards' (shard_read.c) and its self-digest, compared in full
 *   (their last digit changed). */
#include "../check_run.h"
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "base/sha256.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "data/shards.h"

enum { FULL = 60000 }; /* MNIST's training set */

static char *tmpdir;
static uint8_t *images, *labels; /* FULL synthetic samples, made once (the parent's unchecked fixture) */

static void setup(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tmpdir = tu_mkdtemp("check_full_size");
    tu_synth(FULL, 33, &images, &labels);
}

static void teardown(void)
{
    tu_rmrf(tmpdir);
    free(tmpdir);
    free(images);
    free(labels);
}

/* Runs fn(arg) in a child: it must stop with EX_DATAERR saying says. */
static void refused(void (*fn)(void *), void *arg, const char *says)
{
    char err[4096];
    int code = tu_run(fn, arg, err, sizeof err);
    ck_assert_msg(code == EX_DATAERR && strstr(err, says), "exit %d, expected %d saying '%s': %s", code, EX_DATAERR,
                  says, err);
}

static void read_labels(void *path)
{
    uint64_t n = 0;
    free(idx_read_labels(path, &n, NULL));
}

START_TEST(idx_last_label_out_of_range)
{
    char *p = tu_path(tmpdir, "labels");
    uint8_t *lb = xmalloc(FULL);
    memcpy(lb, labels, FULL);
    tu_write_idx_labels(p, lb, FULL);
    read_labels(p); /* the intact file reads */
    lb[FULL - 1] = 10;
    tu_write_idx_labels(p, lb, FULL);
    refused(read_labels, p, "label 10 at index 59999 is out of range");
    free(lb);
    free(p);
}
END_TEST

static void write_bad_last(void *dir)
{
    labels[FULL - 1] = 10; /* in the child only */
    shards_write(dir, "train", 2, images, labels, FULL, NULL);
}

START_TEST(writer_last_label_out_of_range)
{
    char *dir = tu_path(tmpdir, "writer");
    refused(write_bad_last, dir, "label 10 of sample 59999 is out of range");
    free(dir);
}
END_TEST

/* A set of FULL samples in nshards shards under tmpdir/tag, with the digest of the labels as its source's. */
static char *full_set(const char *tag, int nshards)
{
    char *dir = tu_path(tmpdir, tag), sha[SHA256_HEX_LEN + 1];
    sha256_hex(labels, FULL, sha);
    shards_write(dir, "train", nshards, images, labels, FULL, sha);
    return dir;
}

static char *shard(const char *dir, int i, int m)
{
    char name[256];
    return tu_path(dir, shards_name(name, sizeof name, "train", i, m));
}

static void open_set(void *dir) { shards_close(shards_open(dir, "train")); }

static void read_all_labels(void *dir)
{
    shard_set *s = shards_open(dir, "train");
    uint8_t *lb = xmalloc(FULL);
    shards_read_range(s, 0, FULL, NULL, lb);
    free(lb);
    shards_close(s);
}

/* The last label of a one-shard set set to 12 through HDF5 (valid Fletcher-32; the manifest removed,
 * since its digest would refuse the file first), then all labels read in one range. */
START_TEST(reader_last_label_out_of_range)
{
    char *dir = full_set("reader", 1), *p = shard(dir, 0, 1), *mf = tu_path(dir, "train.manifest");
    ck_assert_int_eq(remove(mf), 0);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "labels", H5P_DEFAULT), fs = H5Dget_space(ds);
    hsize_t start = FULL - 1, one = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    uint8_t v = 12;
    ck_assert_int_ge(H5Dwrite(ds, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, &v), 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    H5Fclose(f);
    refused(read_all_labels, dir, "label 12 of sample 59999 (local 59999) is out of range");
    free(mf);
    free(p);
    free(dir);
}
END_TEST

static void flip_last_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    int c = fgetc(f);
    ck_assert_int_ne(c, EOF);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
    ck_assert_int_ne(fputc(c ^ 0x01, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

/* Two shards of about 24 MB each: the last byte of the last one flipped. */
START_TEST(manifest_last_byte_of_last_shard)
{
    char *dir = full_set("lastbyte", 2), *p = shard(dir, 1, 2);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_gt(st.st_size, 8 << 20);
    open_set(dir); /* the intact set opens */
    flip_last_byte(p);
    refused(open_set, dir, "does not match its SHA-256");
    free(p);
    free(dir);
}
END_TEST

/* The manifest's text with its last line (manifest_sha256) made valid again for the text before it. */
static void reseal_manifest(char *text)
{
    char *last = strstr(text, "manifest_sha256 ");
    ck_assert_ptr_nonnull(last);
    sha256_hex(text, (size_t)(last - text), last + 16);
    last[16 + SHA256_HEX_LEN] = '\n';
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char *buf = xmalloc(1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* The last hex digit of the digest that ends at end (exclusive) replaced by another digit. */
static void change_last_digit(char *end) { end[-1] = end[-1] == '0' ? '1' : '0'; }

/* A manifest whose last shard's digest differs from the file's in its last digit only (the manifest's
 * own digest made valid again): the shard is refused. */
START_TEST(manifest_shard_digest_last_digit)
{
    char *dir = full_set("digest", 2), *mf = tu_path(dir, "train.manifest"), *text = read_text(mf);
    char *last = strstr(text, "manifest_sha256 ");
    ck_assert_ptr_nonnull(last);
    change_last_digit(last - 1); /* the file line before it ends "<sha256>\n" */
    reseal_manifest(text);
    tu_write_file(mf, text, strlen(text));
    refused(open_set, dir, "-00001-of-00002.h5' does not match its SHA-256");
    free(text);
    free(mf);
    free(dir);
}
END_TEST

/* A manifest whose source_sha256 differs from the shards' own attribute in its last digit only. */
START_TEST(manifest_source_digest_last_digit)
{
    char *dir = full_set("source", 2), *mf = tu_path(dir, "train.manifest"), *text = read_text(mf);
    char *line = strstr(text, "source_sha256 ");
    ck_assert_ptr_nonnull(line);
    change_last_digit(line + 14 + SHA256_HEX_LEN);
    reseal_manifest(text);
    tu_write_file(mf, text, strlen(text));
    refused(open_set, dir, "its manifest");
    free(text);
    free(mf);
    free(dir);
}
END_TEST

/* A manifest whose manifest_sha256 line differs in its last digit only. */
START_TEST(manifest_self_digest_last_digit)
{
    char *dir = full_set("self", 2), *mf = tu_path(dir, "train.manifest"), *text = read_text(mf);
    change_last_digit(text + strlen(text) - 1);
    tu_write_file(mf, text, strlen(text));
    refused(open_set, dir, "does not match its manifest_sha256 line");
    free(text);
    free(mf);
    free(dir);
}
END_TEST

int main(void)
{
    error_set_program("check_full_size");
    Suite *s = suite_create("full-size");
    TCase *tc = tcase_create("full-size");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, idx_last_label_out_of_range);
    tcase_add_test(tc, writer_last_label_out_of_range);
    tcase_add_test(tc, reader_last_label_out_of_range);
    tcase_add_test(tc, manifest_last_byte_of_last_shard);
    tcase_add_test(tc, manifest_shard_digest_last_digit);
    tcase_add_test(tc, manifest_source_digest_last_digit);
    tcase_add_test(tc, manifest_self_digest_last_digit);
    suite_add_tcase(s, tc);
    return check_run(s);
}
