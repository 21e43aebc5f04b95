/* HDF5 shards, the writer: unwritable outputs and bad arguments refused with nothing created, and its
 * atomicity: no complete-looking set after a failure midway or an interruption by a signal; the request's
 * limits at their edges and the chunks around their sizes. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "data_testutil.h"
#include "base/errors.h"
#include "data/idx.h"
#include "data/shards.h"
#include "shards_testutil.h"

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
        {dir, "train", 0, 0},   {dir, "train", 121, 0}, {dir, "../evil", 2, 0},
        {dir, ".hidden", 2, 0}, {dir, "", 2, 0},        {dir, "-dash", 2, 0}, /* '-' and '.' not first */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        ck_assert_int_eq(tu_run(write_fn, &cases[k], err, sizeof err), EX_USAGE);
    /* A prefix of at most 64 characters: 63 and 64 are names, 65 is not. */
    char name[66];
    for (int n = 63; n <= 65; n++) {
        memset(name, 'p', (size_t)n), name[n] = '\0';
        ck_assert_msg(shards_prefix_ok(name) == (n <= 64), "a prefix of %d characters %s", n,
                      n <= 64 ? "refused" : "accepted");
    }
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
                ck_assert_msg(shards == 0 || shards == 8, "signal %d at %.2f of the write: %d shard files: %s", sigs[a],
                              fractions[b], shards, list);
                ck_assert_msg(tmps == 0, "signal %d at %.2f of the write: temporaries left: %s", sigs[a], fractions[b],
                              list);
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
    fprintf(stderr,
            "check_shards_writer: interrupted writers (write takes %.3f s): %d left a complete set, %d none or "
            "a refused part\n",
            tw, complete, empty);
    free_data(&d);
}
END_TEST

/* ------------------------------------------------------------------ limits */

typedef struct {
    const char *dir;
    uint64_t n;
    int nshards;
    const char *sha;
} limit_arg;

/* n samples (labels i % 10) into nshards; none at all past SHARDS_MAX_SAMPLES (refused before reading). */
static void limit_fn(void *arg)
{
    const limit_arg *a = arg;
    uint8_t *im = NULL, *lb = NULL;
    if (a->n <= 1 << 20) {
        im = calloc(a->n, MNIST_PIXELS);
        lb = malloc(a->n);
        for (uint64_t i = 0; i < a->n; i++)
            lb[i] = (uint8_t)(i % 10);
    }
    shards_write(a->dir, "train", a->nshards, im, lb, a->n, a->sha);
    free(im);
    free(lb);
}

/* err is the one line "check_shards_writer: error: WANT [host, file:line]". */
static void assert_line(const char *err, const char *want)
{
    const char *head = "check_shards_writer: error: ";
    size_t h = strlen(head), w = strlen(want), e = strlen(err);
    ck_assert_msg(strncmp(err, head, h) == 0 && strncmp(err + h, want, w) == 0 && strncmp(err + h + w, " [", 2) == 0 &&
                      strchr(err + h + w, '\n') == err + e - 1 && err[e - 2] == ']',
                  "got: %swant: %s%s [...]", err, head, want);
}

/* Each limit of a request at its edge: samples (SHARDS_MAX_SAMPLES + 1), as many shards as samples and one
 * more, the source digest's length and case (and none). Refused requests create nothing. */
START_TEST(writer_limits)
{
    char *dir = subdir("limits"), err[2048], want[512];
    char sha64[SHA256_HEX_LEN + 1], sha63[SHA256_HEX_LEN], upper[SHA256_HEX_LEN + 1];
    memset(sha64, 'a', SHA256_HEX_LEN), sha64[SHA256_HEX_LEN] = '\0';
    memcpy(sha63, sha64, SHA256_HEX_LEN - 1), sha63[SHA256_HEX_LEN - 1] = '\0';
    memcpy(upper, sha64, sizeof upper), upper[7] = 'A';
    limit_arg big = {dir, SHARDS_MAX_SAMPLES + 1, 1, NULL};
    ck_assert_int_eq(tu_run(limit_fn, &big, err, sizeof err), EX_DATAERR);
    snprintf(want, sizeof want, "cannot write 16777217 samples to %s/train-*.h5 (1..16777216)", dir);
    assert_line(err, want);
    limit_arg more = {dir, 5, 6, NULL};
    ck_assert_int_eq(tu_run(limit_fn, &more, err, sizeof err), EX_USAGE);
    assert_line(err, "cannot split 5 samples into 6 shards (1..5)");
    limit_arg d63 = {dir, 5, 1, sha63}, dup = {dir, 5, 1, upper};
    ck_assert_int_eq(tu_run(limit_fn, &d63, err, sizeof err), EX_SOFTWARE);
    ck_assert_int_eq(tu_run(limit_fn, &dup, err, sizeof err), EX_SOFTWARE);
    snprintf(want, sizeof want, "source digest '%s' is not a SHA-256 in lowercase hex", upper);
    assert_line(err, want);
    ck_assert_int_eq(tu_count(dir, NULL), 0);
    limit_arg each = {dir, 5, 5, sha64}, none = {dir, 7, 1, NULL};
    ck_assert_int_eq(tu_run(limit_fn, &each, err, sizeof err), 0);
    ck_assert_int_eq(tu_count(dir, NULL), 5 + 1);
    ck_assert_int_eq(tu_run(limit_fn, &none, err, sizeof err), 0);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

/* One dataset's chunk length and contents (byte i: i * 7 of the images, i % 10 of the labels). */
static void check_dataset(hid_t f, const char *name, uint64_t n, hsize_t chunk)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT), pl = H5Dget_create_plist(d);
    hsize_t dims[3] = {0};
    ck_assert_int_ge(H5Pget_chunk(pl, 3, dims), 1);
    ck_assert_msg(dims[0] == chunk, "%s of %llu samples: chunks of %llu, expected %llu", name, (unsigned long long)n,
                  (unsigned long long)dims[0], (unsigned long long)chunk);
    size_t bytes = (size_t)n * (name[0] == 'i' ? MNIST_PIXELS : 1);
    uint8_t *got = malloc(bytes);
    ck_assert_int_ge(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, got), 0);
    for (size_t i = 0; i < bytes; i++)
        ck_assert_uint_eq(got[i], name[0] == 'i' ? (uint8_t)(i * 7) : (uint8_t)(i % 10));
    free(got);
    H5Pclose(pl);
    H5Dclose(d);
}

/* A shard's chunks hold SHARDS_IMAGES_CHUNK images and SHARDS_LABELS_CHUNK labels, or the whole shard if
 * smaller: one sample short of, at and past each, the last chunk partial. */
START_TEST(writer_chunks)
{
    static const uint64_t sizes[] = {SHARDS_IMAGES_CHUNK - 1, SHARDS_IMAGES_CHUNK, SHARDS_IMAGES_CHUNK + 1,
                                     SHARDS_LABELS_CHUNK, SHARDS_LABELS_CHUNK + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        uint64_t n = sizes[k];
        char *dir = subdir("chunks");
        uint8_t *im = malloc(n * MNIST_PIXELS), *lb = malloc(n);
        for (size_t i = 0; i < n * MNIST_PIXELS; i++)
            im[i] = (uint8_t)(i * 7);
        for (uint64_t i = 0; i < n; i++)
            lb[i] = (uint8_t)(i % 10);
        shards_write(dir, "train", 1, im, lb, n, NULL);
        char *path = shard_path(dir, "train", 0, 1);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        check_dataset(f, "images", n, n < SHARDS_IMAGES_CHUNK ? n : SHARDS_IMAGES_CHUNK);
        check_dataset(f, "labels", n, n < SHARDS_LABELS_CHUNK ? n : SHARDS_LABELS_CHUNK);
        H5Fclose(f);
        free(path);
        free(im);
        free(lb);
        tu_rmrf(dir);
        free(dir);
    }
}
END_TEST

static Suite *shards_writer_suite(void)
{
    Suite *s = suite_create("shards-writer");
    TCase *tc = tcase_create("writer");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_exit_test(tc, writer_unwritable_exit, EX_CANTCREAT);
    tcase_add_test(tc, writer_unwritable);
    tcase_add_test(tc, writer_bad_arguments);
    tcase_add_test(tc, writer_failure_leaves_nothing);
    tcase_add_exit_test(tc, writer_failure_exit, EX_CANTCREAT);
    tcase_add_test(tc, writer_failure_exit_aftermath);
    tcase_add_test(tc, writer_interrupted);
    tcase_add_test(tc, writer_limits);
    tcase_add_test(tc, writer_chunks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_shards_writer");
    return check_run(shards_writer_suite());
}
