/* HDF5 shards, the writer: unwritable outputs and bad arguments refused with nothing created, and its
 * atomicity: no complete-looking set after a failure midway or an interruption by a signal. */
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

#include "data_testutil.h"
#include "base/errors.h"
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_shards_writer");
    return check_run(shards_writer_suite());
}
