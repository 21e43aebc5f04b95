/* Shard-set manifests (src/data/manifest.h): what the writer records, its exclusive temporary, and the
 * parser's strictness on manifests whose self-digest is valid but whose content is not (hand-made or
 * hostile). Damaged files and manifests are the corruption campaign's (shard-corruption.sh). */
#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/manifest.h"
#include "base/sha256.h"
#include "data/shards.h"

static char *tmpdir;

static void setup(void) { tmpdir = tu_mkdtemp("check_manifest"); }
static void teardown(void)
{
    tu_rmrf(tmpdir);
    free(tmpdir);
}

/* n synthetic samples written as a set of m shards in a fresh directory dir/tag. */
static char *write_set(const char *tag, uint64_t n, int m)
{
    uint8_t *im, *lb;
    tu_synth(n, 7, &im, &lb);
    char *dir = tu_path(tmpdir, tag), sha[SHA256_HEX_LEN + 1];
    sha256_hex(im, 10, sha);
    shards_write(dir, "train", m, im, lb, n, sha);
    free(im);
    free(lb);
    return dir;
}

START_TEST(records_the_set)
{
    char *dir = write_set("set", 301, 3);
    manifest *m = manifest_load(dir, "train");
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->count, 3);
    ck_assert_uint_eq(m->total, 301);
    ck_assert_uint_eq(strlen(m->source_sha256), SHA256_HEX_LEN);
    const uint64_t samples[3] = {101, 100, 100};
    for (int i = 0; i < 3; i++) {
        char name[64];
        ck_assert_str_eq(m->f[i].name, shards_name(name, sizeof name, "train", i, 3));
        ck_assert_uint_eq(m->f[i].samples, samples[i]);
        char *p = tu_path(dir, name);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_uint_eq(m->f[i].bytes, (uint64_t)st.st_size);
        free(p);
    }
    manifest_free(m);
    ck_assert_ptr_null(manifest_load(dir, "test")); /* none for that prefix */
    free(dir);
}
END_TEST

/* The manifest's temporary is created exclusively: a name planted there beforehand (here a symlink
 * to a victim file) stops the write with EX_CANTCREAT, and is neither followed nor removed. */
static void plant_and_write(void *arg)
{
    const char *dir = arg;
    char name[128];
    snprintf(name, sizeof name, ".train.manifest.tmp.%ld", (long)getpid());
    char *planted = tu_path(dir, name), *victim = tu_path(dir, "victim");
    ck_assert_int_eq(symlink(victim, planted), 0);
    uint8_t *im, *lb;
    tu_synth(50, 1, &im, &lb);
    shards_write(dir, "train", 2, im, lb, 50, NULL);
}

START_TEST(temporary_is_exclusive)
{
    char *dir = tu_path(tmpdir, "planted"), *victim = tu_path(dir, "victim"), err[2048], list[1024];
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    tu_write_file(victim, "precious\n", 9);
    int code = tu_run(plant_and_write, dir, err, sizeof err);
    ck_assert_msg(code == EX_CANTCREAT && strstr(err, "cannot write the manifest") && strstr(err, "File exists"),
                  "exit %d: %s", code, err);
    FILE *f = fopen(victim, "r");
    char buf[32] = "";
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "precious\n");
    /* Nothing of the failed write is left; the planted link stays (it is not ours to remove). */
    tu_listdir(dir, list, sizeof list);
    ck_assert_int_eq(tu_count(dir, NULL), 2);
    ck_assert_msg(tu_count(dir, ".train.manifest.tmp.") == 1, "%s", list);
    free(victim);
    free(dir);
}
END_TEST

/* Manifests with a valid self-digest and one bad record each: the line and the problem. */
typedef struct {
    const char *body; /* without the manifest_sha256 line */
    const char *says;
} bad_text;

#define SHA64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEAD  "mnist_ddp-shard-manifest 1\nprefix train\nshards 2\ntotal_samples 3\nsource_sha256 -\n"
#define F0    "file train-00000-of-00002.h5 2 10 " SHA64 "\n"
#define F1    "file train-00001-of-00002.h5 1 10 " SHA64 "\n"

static const bad_text bad_texts[] = {
    {HEAD F0 F1 "extra line\n", "unexpected text after the last file line"},
    {HEAD F0, "line 5: 2 shards do not fit in the rest of the file"},
    {"mnist_ddp-shard-manifest 1\nprefix train\n", "line 3: expected 'shards', found the end of the file"},
    {"mnist_ddp-shard-manifest 1\nprefix test\n", "line 2: it describes prefix 'test', not 'train'"},
    {"mnist_ddp-shard-manifest 2\n", "line 1: expected 'mnist_ddp-shard-manifest 1'"},
    {"mnist_ddp-shard-manifest 12\n", "line 1: expected 'mnist_ddp-shard-manifest 1'"},
    {"mnist_ddp-shard-manifest 1\nprefixes train\n", "line 2: expected 'prefix'"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 02\n", "line 3: expected a number"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards +2\n", "line 3: expected a number"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 100000\n", "line 3: number out of range"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 2\ntotal_samples 3\nsource_sha256 ABC\n",
     "line 5: expected a SHA-256"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 2\ntotal_samples 3\nsource_sha256 "
     "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n",
     "line 5: expected a SHA-256 digest of 64 lowercase"},
    {HEAD "file train-00001-of-00002.h5 2 10 " SHA64 "\n" F1, "line 6: shard 0 is named 'train-00001-of-00002.h5'"},
    {HEAD "file train-00000-of-00002.h5 4 10 " SHA64 "\n" F1, "line 6: number out of range"},
    {HEAD "file train-00000-of-00002.h5 2 10 " SHA64 "0\n" F1, "line 6: expected a SHA-256"},
    {HEAD "file train-00000-of-00002.h5 1 10 " SHA64 "\n" F1, "the files hold 2 samples, total_samples says 3"},
    /* The counts' limits, one past each (the good side is in parser_limits): */
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 0\ntotal_samples 3\n", "line 4: 0 shards for 3 samples"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 4\ntotal_samples 3\n", "line 4: 4 shards for 3 samples"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 99999\ntotal_samples 3\n", "line 4: 99999 shards for 3 samples"},
    {"mnist_ddp-shard-manifest 1\nprefix train\nshards 1\ntotal_samples 16777217\n",
     "line 4: number out of range (at most 16777216)"},
};
#define NBAD (int)(sizeof bad_texts / sizeof *bad_texts)

static void load_fn(void *arg) { manifest_free(manifest_load(arg, "train")); }

START_TEST(parser_is_strict)
{
    for (int k = -1; k < NBAD; k++) {
        /* k = -1: the good manifest these are cut from loads. */
        const char *body = k < 0 ? HEAD F0 F1 : bad_texts[k].body;
        char *dir = tu_path(tmpdir, "text"), *path = tu_path(dir, "train.manifest"), hex[SHA256_HEX_LEN + 1];
        mkdir(dir, 0700);
        sha256_hex(body, strlen(body), hex);
        size_t len = strlen(body) + 100;
        char *text = xmalloc(len), err[2048];
        snprintf(text, len, "%smanifest_sha256 %s\n", body, hex);
        tu_write_file(path, text, strlen(text));
        int code = tu_run(load_fn, dir, err, sizeof err);
        if (k < 0)
            ck_assert_msg(code == 0, "the good manifest: exit %d: %s", code, err);
        else
            ck_assert_msg(code == EX_DATAERR && strstr(err, "train.manifest' is damaged") &&
                              strstr(err, bad_texts[k].says),
                          "case %d: exit %d: %s", k, code, err);
        free(text);
        free(path);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

/* The good side of the counts' limits: as many shards as samples, and 2^24 samples (SHARDS_MAX_SAMPLES). */
START_TEST(parser_limits)
{
    static const char *const good[] = {
        "mnist_ddp-shard-manifest 1\nprefix train\nshards 3\ntotal_samples 3\nsource_sha256 -\n"
        "file train-00000-of-00003.h5 1 10 " SHA64 "\nfile train-00001-of-00003.h5 1 10 " SHA64
        "\nfile train-00002-of-00003.h5 1 10 " SHA64 "\n",
        "mnist_ddp-shard-manifest 1\nprefix train\nshards 1\ntotal_samples 16777216\nsource_sha256 -\n"
        "file train-00000-of-00001.h5 16777216 10 " SHA64 "\n"};
    static const int count[] = {3, 1};
    static const uint64_t total[] = {3, 16777216};
    for (int k = 0; k < 2; k++) {
        char *dir = tu_path(tmpdir, "limits"), *path = tu_path(dir, "train.manifest"), hex[SHA256_HEX_LEN + 1];
        mkdir(dir, 0700);
        sha256_hex(good[k], strlen(good[k]), hex);
        size_t len = strlen(good[k]) + 100;
        char *text = xmalloc(len);
        snprintf(text, len, "%smanifest_sha256 %s\n", good[k], hex);
        tu_write_file(path, text, strlen(text));
        manifest *m = manifest_load(dir, "train");
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->count, count[k]);
        ck_assert_uint_eq(m->total, total[k]);
        manifest_free(m);
        free(text);
        free(path);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

/* ---- The directory scan (src/data/shard_names.c) ---------------------------------------------------- */

static void touch(const char *dir, const char *name)
{
    char *p = tu_path(dir, name);
    tu_write_file(p, "", 0);
    free(p);
}

/* Canonical names of 4 counts, 20 in all (past the scan's first 16 slots), created out of order, beside
 * look-alikes of another prefix: sorted by count, then index; "train_..." and "trainer-..." are not train's. */
START_TEST(scan_sorts_and_skips)
{
    char *dir = tu_path(tmpdir, "scan"), name[64];
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    static const int made[][2] = {{2, 3}, {99999, 99999}, {0, 3}, {1, 2}, {1, 3}, {0, 2}};
    for (size_t k = 0; k < sizeof made / sizeof *made; k++) {
        snprintf(name, sizeof name, "train-%05d-of-%05d.h5", made[k][0], made[k][1]);
        touch(dir, name);
    }
    for (int i = 13; i >= 0; i--) {
        snprintf(name, sizeof name, "train-%05d-of-00014.h5", i);
        touch(dir, name);
    }
    static const char *const others[] = {"train_00000-of-00001.h5",  "trainer-00000-of-00001.h5",
                                         "test-00000-of-00001.h5",   "train.manifest",
                                         "train-00000-of-00001.h5x", ".train-00000-of-00001.h5.AbC123"};
    for (size_t k = 0; k < sizeof others / sizeof *others; k++)
        touch(dir, others[k]);
    shard_entry *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(shard_scan_dir(dir, "train", 0, &v, &n), 0);
    ck_assert_uint_eq(n, 20);
    int want[20][2] = {{0, 2}, {1, 2}, {0, 3}, {1, 3}, {2, 3}};
    for (int i = 0; i < 14; i++)
        want[5 + i][0] = i, want[5 + i][1] = 14;
    want[19][0] = want[19][1] = 99999;
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "train-%05d-of-%05d.h5", want[i][0], want[i][1]);
        ck_assert_msg(v[i].index == want[i][0] && v[i].count == want[i][1] && !strcmp(v[i].name, name),
                      "entry %zu: %s (%d of %d), expected %s", i, v[i].name, v[i].index, v[i].count, name);
    }
    shard_entries_free(v, n);
    ck_assert_int_eq(shard_scan_dir(dir, "test", 0, &v, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(v[0].name, "test-00000-of-00001.h5");
    shard_entries_free(v, n);
    free(dir);
}
END_TEST

typedef struct {
    const char *dir;
    int lenient;
} scan_arg;

static void scan_fn(void *arg)
{
    const scan_arg *a = arg;
    shard_entry *v = NULL;
    size_t n = 0;
    if (shard_scan_dir(a->dir, "train", a->lenient, &v, &n) != 0)
        exit(99);
    shard_entries_free(v, n);
    exit(n == 1 ? 0 : 90 + (int)n);
}

/* A look-alike that is not canonical, beside one good shard: the strict scan dies 65 naming it, the lenient
 * one skips it. Numbers above SHARDS_MAX (99999) are canonical in form ("%05d" of 100000 is 100000) and
 * refused by the limit alone. */
START_TEST(scan_refuses_lookalikes)
{
    static const char *const bad[] = {"train-0-of-00003.h5",      "train-000001-of-00003.h5",
                                      "train-00001-of-3.h5",      "train-100000-of-100000.h5",
                                      "train-00001-of-100000.h5", "train-100000-of-00003.h5"};
    char err[2048], line[512];
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char *dir = tu_path(tmpdir, "lookalike");
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        touch(dir, "train-00000-of-00003.h5");
        touch(dir, bad[k]);
        scan_arg a = {dir, 0};
        ck_assert_int_eq(tu_run(scan_fn, &a, err, sizeof err), EX_DATAERR);
        /* One line: the message, then where ("[host, file:line]"). */
        int len = snprintf(line, sizeof line,
                           "check_manifest: error: unexpected file '%s' in shard directory '%s': shard files are "
                           "named train-NNNNN-of-MMMMM.h5 (5 digits, count <= 99999) [",
                           bad[k], dir);
        ck_assert_msg(!strncmp(err, line, (size_t)len) && strchr(err, '\n') == err + strlen(err) - 1 &&
                          strstr(err, "shard_names.c:") != NULL,
                      "%s: got %s", bad[k], err);
        a.lenient = 1;
        ck_assert_msg(tu_run(scan_fn, &a, err, sizeof err) == 0, "lenient scan with %s: %s", bad[k], err);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

int main(void)
{
    error_set_program("check_manifest");
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("manifest");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, records_the_set);
    tcase_add_test(tc, temporary_is_exclusive);
    tcase_add_test(tc, parser_is_strict);
    tcase_add_test(tc, parser_limits);
    tcase_add_test(tc, scan_sorts_and_skips);
    tcase_add_test(tc, scan_refuses_lookalikes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
