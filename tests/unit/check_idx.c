/* IDX parsing and SHA-256: good files, and every bad case dies with the right code and a line
 * naming the file and the problem. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/idx.h"
#include "base/sha256.h"

static char *g_dir; /* created in the parent (unchecked fixture), shared by the forked tests */

static void dir_setup(void) { g_dir = tu_mkdtemp("check_idx"); }
static void dir_teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}

/* ------------------------------------------------------------------ SHA-256 */

START_TEST(sha256_vectors)
{
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(m448, strlen(m448), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
        "mnopqrstnopqrstu";
    sha256_hex(m896, strlen(m896), hex);
    ck_assert_str_eq(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}
END_TEST

/* A file hashed from an offset: the skipped prefix is not hashed, the count is what was, and a file
 * larger than the read buffer is hashed whole. */
START_TEST(sha256_file_from_offset)
{
    char *dir = tu_mkdtemp("check_sha256"), *path = tu_path(dir, "hash-me");
    static char big[100000];
    memset(big, 'a', sizeof big);
    memcpy(big + sizeof big - 3, "abc", 3);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(big, 1, sizeof big, f), sizeof big);
    fclose(f);
    char hex[SHA256_HEX_LEN + 1], want[SHA256_HEX_LEN + 1];
    uint64_t n = 0;
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(sha256_fd_hex(fd, sizeof big - 3, hex, &n), 0);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(sha256_fd_hex(fd, 0, hex, &n), 0);
    sha256_hex(big, sizeof big, want);
    ck_assert_str_eq(hex, want);
    ck_assert_uint_eq(n, sizeof big);
    close(fd);
    ck_assert_int_ne(sha256_fd_hex(-1, 0, hex, NULL), 0);
    free(path);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* A million 'a' fed in awkward piece sizes: the buffering across blocks. */
START_TEST(sha256_incremental)
{
    static char buf[1000000];
    memset(buf, 'a', sizeof buf);
    char hex[SHA256_HEX_LEN + 1];
    static const size_t pieces[] = {1, 63, 64, 65, 127, 0, 4096, 3, 55, 56, 57};
    sha256_ctx c;
    sha256_init(&c);
    size_t off = 0, k = 0;
    while (off < sizeof buf) {
        size_t take = pieces[k++ % (sizeof pieces / sizeof *pieces)];
        if (take > sizeof buf - off)
            take = sizeof buf - off;
        sha256_update(&c, buf + off, take);
        off += take;
    }
    sha256_final_hex(&c, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Lengths around the padding boundary agree with one-shot hashing of a fresh context. */
    for (size_t len = 50; len < 140; len++) {
        char one[SHA256_HEX_LEN + 1], two[SHA256_HEX_LEN + 1];
        sha256_hex(buf, len, one);
        sha256_init(&c);
        sha256_update(&c, buf, len / 3);
        sha256_update(&c, buf + len / 3, len - len / 3);
        sha256_final_hex(&c, two);
        ck_assert_str_eq(one, two);
    }
}
END_TEST

/* ------------------------------------------------------------------ good files */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = xmalloc((size_t)n);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

START_TEST(good_roundtrip)
{
    const uint64_t counts[] = {0, 1, 7, 1000};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        uint64_t n = counts[c], ni = 99, nl = 99;
        uint8_t *im, *lb;
        tu_synth(n, c, &im, &lb);
        char *pi = tu_path(g_dir, "good-images"), *pl = tu_path(g_dir, "good-labels");
        tu_write_idx_images(pi, im, n);
        tu_write_idx_labels(pl, lb, n);
        char hi[SHA256_HEX_LEN + 1], hl[SHA256_HEX_LEN + 1], want[SHA256_HEX_LEN + 1];
        uint8_t *ri = idx_read_images(pi, &ni, hi);
        uint8_t *rl = idx_read_labels(pl, &nl, hl);
        ck_assert_uint_eq(ni, n);
        ck_assert_uint_eq(nl, n);
        ck_assert_int_eq(memcmp(ri, im, n * MNIST_PIXELS), 0);
        ck_assert_int_eq(memcmp(rl, lb, n), 0);
        /* The digest is that of the whole file (header included). */
        size_t len;
        uint8_t *raw = slurp(pi, &len);
        ck_assert_uint_eq(len, 16 + n * MNIST_PIXELS);
        ck_assert_uint_eq(raw[2], 0x08);
        ck_assert_uint_eq(raw[3], 0x03);
        sha256_hex(raw, len, want);
        ck_assert_str_eq(hi, want);
        free(raw);
        raw = slurp(pl, &len);
        ck_assert_uint_eq(len, 8 + n);
        sha256_hex(raw, len, want);
        ck_assert_str_eq(hl, want);
        free(raw);

        idx_set set;
        idx_load(pi, pl, &set);
        ck_assert_uint_eq(set.count, n);
        ck_assert_int_eq(memcmp(set.images, im, n * MNIST_PIXELS), 0);
        ck_assert_int_eq(memcmp(set.labels, lb, n), 0);
        ck_assert_str_eq(set.images_sha256, hi);
        idx_free(&set);
        free(ri);
        free(rl);
        free(im);
        free(lb);
        free(pi);
        free(pl);
    }
}
END_TEST

/* Hand-made header bytes: the reader follows the big-endian format, not our writer. */
START_TEST(good_handmade)
{
    uint8_t f[16 + 2 * MNIST_PIXELS] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
    for (int i = 0; i < 2 * MNIST_PIXELS; i++)
        f[16 + i] = (uint8_t)(i * 7);
    uint8_t l[10] = {0, 0, 8, 1, 0, 0, 0, 2, 9, 0};
    char *pi = tu_path(g_dir, "hand-images"), *pl = tu_path(g_dir, "hand-labels");
    tu_write_file(pi, f, sizeof f);
    tu_write_file(pl, l, sizeof l);
    idx_set set;
    idx_load(pi, pl, &set);
    ck_assert_uint_eq(set.count, 2);
    ck_assert_int_eq(memcmp(set.images, f + 16, 2 * MNIST_PIXELS), 0);
    ck_assert_uint_eq(set.labels[0], 9);
    ck_assert_uint_eq(set.labels[1], 0);
    idx_free(&set);
    free(pi);
    free(pl);
}
END_TEST

/* ------------------------------------------------------------------ bad files */

typedef struct {
    const char *name;    /* file name in g_dir */
    int labels;          /* 1: read as labels, 0: as images, 2: idx_load(name, name2) */
    int code;            /* expected exit status */
    const char *keyword; /* expected in the message */
} bad_case;

/* Create the file for case k; returns the path (and sets *other for count mismatch). */
static char *make_bad(const char *name, char **other)
{
    char *p = tu_path(g_dir, name);
    uint8_t img_hdr[16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28};
    uint8_t lab_hdr[8] = {0, 0, 8, 1, 0, 0, 0, 3};
    uint8_t buf[16 + 4 * MNIST_PIXELS];
    memset(buf, 1, sizeof buf);
    *other = NULL;
    if (!strcmp(name, "missing")) {
        /* nothing */
    } else if (!strcmp(name, "wrong-magic")) {
        memcpy(buf, img_hdr, 16);
        buf[3] = 0x04;
        tu_write_file(p, buf, 16 + 3 * MNIST_PIXELS);
    } else if (!strcmp(name, "labels-as-images")) {
        memcpy(buf, lab_hdr, 8);
        tu_write_file(p, buf, 8 + 3);
    } else if (!strcmp(name, "images-as-labels")) {
        memcpy(buf, img_hdr, 16);
        tu_write_file(p, buf, 16 + 3 * MNIST_PIXELS);
    } else if (!strcmp(name, "labels-wrong-magic")) {
        memcpy(buf, lab_hdr, 8);
        buf[2] = 0x09;
        tu_write_file(p, buf, 8 + 3);
    } else if (!strcmp(name, "truncated-header")) {
        memcpy(buf, img_hdr, 16);
        tu_write_file(p, buf, 10);
    } else if (!strcmp(name, "truncated-images")) {
        memcpy(buf, img_hdr, 16);
        tu_write_file(p, buf, 16 + 3 * MNIST_PIXELS - 1);
    } else if (!strcmp(name, "truncated-labels")) {
        memcpy(buf, lab_hdr, 8);
        tu_write_file(p, buf, 8 + 2);
    } else if (!strcmp(name, "trailing-images")) {
        memcpy(buf, img_hdr, 16);
        tu_write_file(p, buf, 16 + 3 * MNIST_PIXELS + 5);
    } else if (!strcmp(name, "trailing-labels")) {
        memcpy(buf, lab_hdr, 8);
        tu_write_file(p, buf, 8 + 4);
    } else if (!strcmp(name, "label-ten")) {
        memcpy(buf, lab_hdr, 8);
        buf[8 + 2] = 10;
        tu_write_file(p, buf, 8 + 3);
    } else if (!strcmp(name, "wrong-size")) {
        memcpy(buf, img_hdr, 16);
        buf[15] = 27; /* 28x27 */
        tu_write_file(p, buf, 16 + 3 * 28 * 27);
    } else if (!strcmp(name, "gzipped")) {
        uint8_t gz[20] = {0x1f, 0x8b, 8, 0};
        tu_write_file(p, gz, sizeof gz);
    } else if (!strcmp(name, "empty")) {
        tu_write_file(p, buf, 0);
    } else if (!strcmp(name, "count-mismatch")) {
        memcpy(buf, img_hdr, 16);
        tu_write_file(p, buf, 16 + 3 * MNIST_PIXELS);
        *other = tu_path(g_dir, "count-mismatch-labels");
        uint8_t l[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 2};
        tu_write_file(*other, l, sizeof l);
    } else if (!strcmp(name, "a-directory")) {
        mkdir(p, 0755);
    }
    return p;
}

static const bad_case bad_cases[] = {
    {"missing", 0, EX_NOINPUT, "No such file"},
    {"a-directory", 0, EX_NOINPUT, "directory"},
    {"wrong-magic", 0, EX_DATAERR, "wrong magic 0x00000804"},
    /* Whole clauses: the hint names the kind the file is, and the kind expected. */
    {"labels-as-images", 0, EX_DATAERR,
     "wrong magic 0x00000801 (that of an IDX labels file; expected 0x00000803): are the images and labels files "
     "swapped?"},
    {"images-as-labels", 1, EX_DATAERR,
     "wrong magic 0x00000803 (that of an IDX images file; expected 0x00000801): are the images and labels files "
     "swapped?"},
    {"labels-wrong-magic", 1, EX_DATAERR, "wrong magic 0x00000901"},
    {"truncated-header", 0, EX_DATAERR, "truncated"},
    {"truncated-images", 0, EX_DATAERR, "truncated: 2367 bytes, expected 2368"},
    {"truncated-labels", 1, EX_DATAERR, "truncated: 10 bytes, expected 11"},
    {"trailing-images", 0, EX_DATAERR, "5 trailing bytes"},
    {"trailing-labels", 1, EX_DATAERR, "1 trailing bytes"},
    {"label-ten", 1, EX_DATAERR, "label 10 at index 2"},
    {"wrong-size", 0, EX_DATAERR, "28x27"},
    {"gzipped", 0, EX_DATAERR, "gzip"},
    {"empty", 1, EX_DATAERR, "truncated"},
    {"count-mismatch", 2, EX_DATAERR, "/count-mismatch' has 3 images but labels file '"}, /* each count its file's */
};
#define NBAD (int)(sizeof bad_cases / sizeof *bad_cases)

static void run_bad(const bad_case *c)
{
    char *other = NULL;
    char *p = make_bad(c->name, &other);
    uint64_t n;
    if (c->labels == 2) {
        idx_set set;
        idx_load(p, other, &set);
    } else if (c->labels) {
        free(idx_read_labels(p, &n, NULL));
    } else {
        free(idx_read_images(p, &n, NULL));
    }
    free(p);
    free(other);
}

/* Each case as an exit test: the process must die with the case's code. */
START_TEST(bad_exit) { run_bad(&bad_cases[_i]); }
END_TEST

static void run_bad_fn(void *arg) { run_bad(arg); }

/* Each case again in a child with stderr captured: the code, the file name and the problem. */
START_TEST(bad_messages)
{
    for (int k = 0; k < NBAD; k++) {
        const bad_case *c = &bad_cases[k];
        char err[4096];
        int code = tu_run(run_bad_fn, (void *)c, err, sizeof err);
        ck_assert_msg(code == c->code, "%s: exit %d, expected %d", c->name, code, c->code);
        ck_assert_msg(strstr(err, c->keyword) != NULL, "%s: message lacks '%s': %s", c->name, c->keyword, err);
        ck_assert_msg(strstr(err, c->name) != NULL, "%s: message does not name the file: %s", c->name, err);
        ck_assert_msg(strncmp(err, "check_idx: error: ", 18) == 0, "%s: not a die() line: %s", c->name, err);
        ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "%s: not one line: %s", c->name, err);
    }
}
END_TEST

static void read_images_fn(void *path)
{
    uint64_t n;
    free(idx_read_images(path, &n, NULL));
}

/* Through a FIFO (no file size to look at): truncation and trailing bytes are still caught. */
START_TEST(bad_through_fifo)
{
    const char *names[] = {"truncated-images", "trailing-images"};
    const char *want[] = {"truncated: 2367 bytes, expected 2368", "5 trailing bytes"};
    for (int k = 0; k < 2; k++) {
        char *other, *p = make_bad(names[k], &other), *fifo = tu_path(g_dir, "fifo");
        remove(fifo);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            signal(SIGPIPE, SIG_DFL);
            tu_copy_file(p, fifo);
            _exit(0);
        }
        char err[2048];
        int code = tu_run(read_images_fn, fifo, err, sizeof err);
        waitpid(pid, NULL, 0);
        ck_assert_int_eq(code, EX_DATAERR);
        ck_assert_msg(strstr(err, want[k]) != NULL, "%s: %s", names[k], err);
        free(p);
        free(fifo);
    }
}
END_TEST

static void load_fn(void *arg)
{
    char **paths = arg;
    idx_set set;
    idx_load(paths[0], paths[1], &set);
    idx_free(&set);
}

/* A pipe that delivers a whole good file is accepted. */
START_TEST(good_through_fifo)
{
    uint8_t *im, *lb;
    tu_synth(5, 3, &im, &lb);
    char *pi = tu_path(g_dir, "fifo-good-images"), *pl = tu_path(g_dir, "fifo-good-labels");
    char *fifo = tu_path(g_dir, "fifo-good");
    tu_write_idx_images(pi, im, 5);
    tu_write_idx_labels(pl, lb, 5);
    remove(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) {
        tu_copy_file(pi, fifo);
        _exit(0);
    }
    char *paths[2] = {fifo, pl}, err[2048];
    ck_assert_int_eq(tu_run(load_fn, paths, err, sizeof err), 0);
    waitpid(pid, NULL, 0);
    free(im);
    free(lb);
    free(pi);
    free(pl);
    free(fifo);
}
END_TEST

/* ------------------------------------------------------------------ the real MNIST files */

/* The verified cache of data/fetch-mnist: $MNIST_IDX_DIR, else $abs_top_builddir/data/cache. */
static char *real_file(const char *name)
{
    const char *dir = tu_env("MNIST_IDX_DIR");
    char *cache = NULL, *p;
    if (!dir && tu_env("abs_top_builddir")) {
        cache = tu_path(tu_env("abs_top_builddir"), "data/cache");
        dir = cache;
    }
    if (!dir)
        return NULL;
    p = tu_path(dir, name);
    free(cache);
    if (access(p, R_OK) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

START_TEST(real_mnist)
{
    static const struct {
        const char *images, *labels, *sha;
        uint64_t count;
        uint8_t first[10];
    } sets[] = {
        {"train-images-idx3-ubyte",
         "train-labels-idx1-ubyte",
         "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
         60000,
         {5, 0, 4, 1, 9, 2, 1, 3, 1, 4}},
        {"t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte",
         "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
         10000,
         {7, 2, 1, 0, 4, 1, 4, 9, 5, 9}},
    };
    for (int k = 0; k < 2; k++) {
        char *pi = real_file(sets[k].images), *pl = real_file(sets[k].labels);
        /* make check prepares the data first, so a missing file is a broken set-up, not a reason to pass. */
        if (!pi || !pl)
            ck_abort_msg("real MNIST IDX file %s not found (data/cache, $MNIST_IDX_DIR): run 'make data'",
                         sets[k].images);
        idx_set set;
        idx_load(pi, pl, &set);
        ck_assert_uint_eq(set.count, sets[k].count);
        ck_assert_str_eq(set.images_sha256, sets[k].sha);
        ck_assert_int_eq(memcmp(set.labels, sets[k].first, 10), 0);
        unsigned hist[10] = {0};
        for (uint64_t i = 0; i < set.count; i++)
            hist[set.labels[i]]++;
        for (int c = 0; c < 10; c++)
            ck_assert_uint_gt(hist[c], set.count / 20);
        idx_free(&set);
        free(pi);
        free(pl);
    }
}
END_TEST

static Suite *idx_suite(void)
{
    Suite *s = suite_create("idx");
    TCase *tc = tcase_create("sha256");
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, sha256_incremental);
    tcase_add_test(tc, sha256_file_from_offset);
    suite_add_tcase(s, tc);

    tc = tcase_create("good");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, good_roundtrip);
    tcase_add_test(tc, good_handmade);
    tcase_add_test(tc, good_through_fifo);
    tcase_add_test(tc, real_mnist);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    for (int k = 0; k < NBAD; k++)
        tcase_add_loop_exit_test(tc, bad_exit, bad_cases[k].code, k, k + 1);
    tcase_add_test(tc, bad_messages);
    tcase_add_test(tc, bad_through_fifo);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_idx");
    return check_run(idx_suite());
}
