/* The atomic_file helper (src/base/atomic_file.h): exclusive temporaries that never follow a planted symlink,
 * the umask honoured, nothing left on abort, terminating signals held until the file is in place, stale
 * temporaries of dead writers removed (and only those), and a seal that refuses every damaged byte and
 * every truncation. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "data_testutil.h"
#include "base/errors.h"

static char *g_dir;

static void dir_setup(void) { g_dir = tu_mkdtemp("check_atomic_file"); }
static void dir_teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}

/* The temporary af_open tries first (n = 0) for final name `name` in g_dir, as this process. */
static char *first_temp(const char *name, long pid, const char *host)
{
    char h[256], buf[4096];
    if (!host) {
        ck_assert_int_eq(gethostname(h, sizeof h), 0);
        host = h;
    }
    snprintf(buf, sizeof buf, "%s/.%s.%ld.0@%s.tmp", g_dir, name, pid, host);
    return strdup(buf);
}

static void read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* Writes text to path through af_open .. af_commit; returns af_commit's result. */
static int write_atomically(const char *path, const char *text)
{
    atomic_file a;
    ck_assert_int_eq(af_open(&a, path), 0);
    ck_assert_int_eq(write(a.fd, text, strlen(text)), (ssize_t)strlen(text));
    return af_commit(&a);
}

START_TEST(planted_symlink_is_not_followed)
{
    char *path = tu_path(g_dir, "out"), *victim = tu_path(g_dir, "victim"), buf[64];
    char *planted = first_temp("out", (long)getpid(), NULL);
    tu_write_file(victim, "precious", 8);
    ck_assert_int_eq(symlink(victim, planted), 0);
    ck_assert_int_eq(write_atomically(path, "new"), 0);
    read_text(victim, buf, sizeof buf);
    ck_assert_str_eq(buf, "precious");
    read_text(path, buf, sizeof buf);
    ck_assert_str_eq(buf, "new");
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    free(path), free(victim), free(planted);
}
END_TEST

START_TEST(umask_applies)
{
    static const mode_t masks[] = {077, 022, 0};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "mode%d", i);
        char *path = tu_path(g_dir, name);
        mode_t old = umask(masks[i]);
        ck_assert_int_eq(write_atomically(path, "x"), 0);
        umask(old);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0666 & ~masks[i]);
        free(path);
    }
}
END_TEST

START_TEST(abort_and_failure_leave_nothing)
{
    char *sub = tu_path(g_dir, "abort"), *path = tu_path(sub, "out"), list[512];
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    atomic_file a;
    ck_assert_int_eq(af_open(&a, path), 0);
    ck_assert_int_eq(write(a.fd, "x", 1), 1);
    af_abort(&a);
    tu_listdir(sub, list, sizeof list);
    ck_assert_str_eq(list, "");
    char *nodir = tu_path(sub, "no/such/out");
    ck_assert_int_eq(af_open(&a, nodir), ENOENT);
    /* A final name that cannot be replaced (a directory): the temporary goes too. */
    ck_assert_int_eq(mkdir(path, 0777), 0);
    ck_assert_int_ne(write_atomically(path, "x"), 0);
    tu_listdir(sub, list, sizeof list);
    ck_assert_str_eq(list, "out");
    free(sub), free(path), free(nodir);
}
END_TEST

static void *idle(void *arg)
{
    for (;;)
        pause();
    return arg;
}

/* In a child: SIGTERM arrives while the file is being written; the process must end by it only after
 * the file is in place. Another thread, as Open MPI and OpenMP start, may be the one the kernel hands a
 * process-directed signal to. */
static void term_during_write(void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0)
        _exit(4);
    atomic_file a;
    if (af_open(&a, arg) != 0)
        _exit(2);
    kill(getpid(), SIGTERM);
    if (write(a.fd, "whole", 5) != 5 || af_commit(&a) != 0)
        _exit(3);
    _exit(0); /* not reached: the held SIGTERM ends the process at af_commit's end */
}

START_TEST(signal_waits_for_the_file)
{
    char *path = tu_path(g_dir, "signalled"), err[256], buf[64];
    ck_assert_int_eq(tu_run(term_during_write, path, err, sizeof err), 128 + SIGTERM);
    read_text(path, buf, sizeof buf);
    ck_assert_str_eq(buf, "whole");
    ck_assert_int_eq(tu_count(g_dir, ".signalled."), 0);
    free(path);
}
END_TEST

static long dead_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return (long)pid;
}

START_TEST(stale_temporaries_of_dead_writers_only)
{
    char *sub = tu_path(g_dir, "stale");
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    char *saved = g_dir;
    g_dir = sub;
    long dead = dead_pid();
    char *mine[] = {
        first_temp("ckpt-000000000007.h5", dead, NULL),           /* removed: ours, writer gone */
        first_temp("ckpt-000000000008.h5", (long)getpid(), NULL), /* writer alive */
        first_temp("ckpt-000000000009.h5", dead, "elsewhere"),    /* another host's pid: unknown here */
        first_temp("model.h5", dead, NULL),                       /* another prefix */
    };
    g_dir = saved;
    for (int i = 0; i < 4; i++)
        tu_write_file(mine[i], "x", 1);
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/ckpt-", sub);
    ck_assert_int_eq(af_remove_stale(prefix), 1);
    ck_assert_int_eq(access(mine[0], F_OK), -1);
    for (int i = 1; i < 4; i++)
        ck_assert_int_eq(access(mine[i], F_OK), 0);
    for (int i = 0; i < 4; i++)
        free(mine[i]);
    free(sub);
}
END_TEST

enum { BODY = 1500 };

/* A sealed file: the userblock, then BODY bytes of content; returns its path. */
static char *sealed_file(const char *name)
{
    char *path = tu_path(g_dir, name), image[BODY];
    for (int i = 0; i < BODY; i++)
        image[i] = (char)(i * 7 + 3);
    atomic_file a;
    ck_assert_int_eq(af_open(&a, path), 0);
    ck_assert_int_eq(af_write_sealed(&a, image, sizeof image), 0);
    ck_assert_int_eq(af_commit(&a), 0);
    return path;
}

static void flip(const char *path, off_t at, unsigned char mask)
{
    int fd = open(path, O_RDWR);
    unsigned char b;
    ck_assert_int_eq(pread(fd, &b, 1, at), 1);
    b ^= mask;
    ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

START_TEST(seal_refuses_every_damaged_byte)
{
    char *path = sealed_file("sealed"), why[512];
    ck_assert_int_eq(af_verify(path, why, sizeof why), AF_SEALED);
    for (off_t at = 0; at < AF_SEAL_BYTES + BODY; at++)
        for (int bit = 0; bit < 8; bit += 7) {
            flip(path, at, (unsigned char)(1u << bit));
            why[0] = 0;
            ck_assert_msg(af_verify(path, why, sizeof why) == AF_BAD, "bit %d of byte %ld passes", bit, (long)at);
            ck_assert(why[0] != 0);
            flip(path, at, (unsigned char)(1u << bit));
        }
    ck_assert_int_eq(af_verify(path, why, sizeof why), AF_SEALED);
    free(path);
}
END_TEST

/* A seal of a newer format, canonical in every other byte, is refused naming both formats: bit flips of the
 * version digit give 0 or no digit, never a later version's file. */
START_TEST(seal_of_a_newer_format)
{
    char *path = sealed_file("newer"), why[512];
    int fd = open(path, O_RDWR);
    ck_assert_int_eq(pwrite(fd, "2", 1, (off_t)strlen("mnist_ddp sealed file ")), 1);
    close(fd);
    ck_assert_int_eq(af_verify(path, why, sizeof why), AF_BAD);
    ck_assert_msg(strstr(why, "sealed in format 2, this mnist_ddp reads format 1") != NULL, "why: %s", why);
    free(path);
}
END_TEST

START_TEST(seal_refuses_every_truncation)
{
    char *path = sealed_file("truncated"), why[512];
    for (off_t len = AF_SEAL_BYTES + BODY + 1; len >= 0; len--) {
        if (len == AF_SEAL_BYTES + BODY)
            continue;
        ck_assert_int_eq(truncate(path, len), 0);
        ck_assert_msg(af_verify(path, why, sizeof why) == AF_BAD, "%ld bytes pass", (long)len);
    }
    free(path);
}
END_TEST

START_TEST(unsealed_hdf5_and_junk)
{
    char *h5 = tu_path(g_dir, "foreign.h5"), *junk = tu_path(g_dir, "junk"), why[512];
    tu_write_file(h5, "\211HDF\r\n\032\n and the rest", 22);
    ck_assert_int_eq(af_verify(h5, why, sizeof why), AF_UNSEALED);
    /* HDF5's signature with its last byte wrong is not HDF5's: the whole 8 bytes are compared. */
    tu_write_file(h5, "\211HDF\r\n\032\r and the rest", 22);
    ck_assert_int_eq(af_verify(h5, why, sizeof why), AF_BAD);
    tu_write_file(junk, "PK\003\004 a zip file", 16);
    ck_assert_int_eq(af_verify(junk, why, sizeof why), AF_BAD);
    ck_assert_ptr_nonnull(strstr(why, "not an HDF5 file"));
    free(h5), free(junk);
}
END_TEST

static Suite *atomic_file_suite(void)
{
    Suite *s = suite_create("atomic_file");
    TCase *tc = tcase_create("write");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, planted_symlink_is_not_followed);
    tcase_add_test(tc, umask_applies);
    tcase_add_test(tc, abort_and_failure_leave_nothing);
    tcase_add_test(tc, signal_waits_for_the_file);
    tcase_add_test(tc, stale_temporaries_of_dead_writers_only);
    suite_add_tcase(s, tc);
    tc = tcase_create("seal");
    tcase_add_unchecked_fixture(tc, dir_setup, dir_teardown);
    tcase_add_test(tc, seal_refuses_every_damaged_byte);
    tcase_add_test(tc, seal_refuses_every_truncation);
    tcase_add_test(tc, seal_of_a_newer_format);
    tcase_add_test(tc, unsealed_hdf5_and_junk);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_atomic_file");
    return check_run(atomic_file_suite());
}
