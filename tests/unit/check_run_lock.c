/* One run per directory (src/base/run_lock.c), each holder a process of its own: the line a holder writes
 * (whole: host, pid, the Slurm job with an array task preferred to the job ID and only when both array
 * variables are set, the start time), the holder named to a second process, the file emptied by a clean exit
 * and kept by one that skips its exit handlers (as a killed process does), and only the first line of a
 * leftover read back, within the caller's buffer. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data_testutil.h"
#include "base/run_lock.h"

static char *tmpdir;

static void setup(void) { tmpdir = tu_mkdtemp("check_run_lock"); }
static void teardown(void)
{
    tu_rmrf(tmpdir);
    free(tmpdir);
}

typedef struct {
    pid_t pid;
    int go;     /* the parent's end: one byte, 'e' to exit, 'k' to _exit */
    int rc;     /* run_lock_take's result in the child */
    int intact; /* the byte after the child's holder buffer was left alone */
    char holder[512];
} holder_proc;

/* A child that takes the lock at path with only the Slurm variables of env set, a holder buffer of hlen
 * bytes, reports, then waits for the parent's word. */
static holder_proc start_holder(const char *path, const char *const *env, size_t hlen)
{
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        unsetenv("SLURM_JOB_ID");
        unsetenv("SLURM_ARRAY_JOB_ID");
        unsetenv("SLURM_ARRAY_TASK_ID");
        for (; env && *env; env++)
            putenv((char *)*env);
        char holder[513];
        memset(holder, 'Z', sizeof holder);
        int rc = run_lock_take(path, holder, hlen);
        dprintf(up[1], "%d %d %s", rc, holder[hlen] == 'Z', holder);
        close(up[1]);
        char how = 'e';
        if (read(down[0], &how, 1) != 1 || how == 'k')
            _exit(0);
        exit(0);
    }
    close(up[1]);
    close(down[0]);
    char buf[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(up[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(up[0]);
    holder_proc h = {.pid = pid, .go = down[1]};
    int off = 0;
    ck_assert_int_eq(sscanf(buf, "%d %d %n", &h.rc, &h.intact, &off), 2);
    snprintf(h.holder, sizeof h.holder, "%s", buf + off);
    return h;
}

static void end_holder(holder_proc *h, char how)
{
    int st;
    ck_assert_int_eq(write(h->go, &how, 1), 1);
    close(h->go);
    ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void read_all(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* text is exactly "host HOST pid PID<slurm> since YYYY-MM-DD HH:MM:SS" followed by end ("\n" or ""). */
static void assert_line(const char *text, pid_t pid, const char *slurm, const char *end)
{
    char host[256] = "?", want[512];
    gethostname(host, sizeof host - 1);
    int n = snprintf(want, sizeof want, "host %s pid %ld%s since ", host, (long)pid, slurm);
    ck_assert_msg(!strncmp(text, want, (size_t)n), "'%s' does not start with '%s'", text, want);
    const char *t = text + n, *shape = "dddd-dd-dd dd:dd:dd";
    for (size_t i = 0; shape[i]; i++)
        ck_assert_msg(shape[i] == 'd' ? isdigit((unsigned char)t[i]) : t[i] == shape[i], "bad time in '%s'", text);
    ck_assert_str_eq(t + strlen(shape), end);
}

START_TEST(holder_named_and_released)
{
    char *path = tu_path(tmpdir, "lock"), text[1024], holder[512];
    holder_proc a = start_holder(path, NULL, 512);
    ck_assert_int_eq(a.rc, RUN_LOCK_TAKEN);
    ck_assert_str_eq(a.holder, ""); /* a new file: no earlier holder */
    read_all(path, text, sizeof text);
    assert_line(text, a.pid, "", "\n");
    /* Another process is told who holds it, in one line. */
    ck_assert_int_eq(run_lock_take(path, holder, sizeof holder), RUN_LOCK_HELD);
    assert_line(holder, a.pid, "", "");
    end_holder(&a, 'e');
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, 0); /* a clean exit empties it */
    holder_proc b = start_holder(path, NULL, 512);
    ck_assert_int_eq(b.rc, RUN_LOCK_TAKEN);
    ck_assert_str_eq(b.holder, "");
    end_holder(&b, 'k'); /* no exit handlers: the line stays */
    read_all(path, text, sizeof text);
    assert_line(text, b.pid, "", "\n");
    holder_proc c = start_holder(path, NULL, 512);
    ck_assert_int_eq(c.rc, RUN_LOCK_TAKEN);
    assert_line(c.holder, b.pid, "", ""); /* the holder that ended without releasing it */
    end_holder(&c, 'e');
    free(path);
}
END_TEST

/* SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID when both are set, else SLURM_JOB_ID; values apart so the line shows
 * which was read. */
START_TEST(slurm_job_named)
{
    static const char *const both[] = {"SLURM_JOB_ID=120", "SLURM_ARRAY_JOB_ID=12", "SLURM_ARRAY_TASK_ID=3", NULL};
    static const char *const job[] = {"SLURM_JOB_ID=120", NULL};
    static const char *const no_task[] = {"SLURM_JOB_ID=120", "SLURM_ARRAY_JOB_ID=12", NULL};
    static const char *const no_array[] = {"SLURM_JOB_ID=120", "SLURM_ARRAY_TASK_ID=3", NULL};
    static const char *const none[] = {NULL};
    static const struct {
        const char *const *env;
        const char *says;
    } cases[] = {{both, " Slurm job 12_3"},
                 {job, " Slurm job 120"},
                 {no_task, " Slurm job 120"},
                 {no_array, " Slurm job 120"},
                 {none, ""}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char name[32], text[1024];
        snprintf(name, sizeof name, "lock%zu", k);
        char *path = tu_path(tmpdir, name);
        holder_proc h = start_holder(path, cases[k].env, 512);
        ck_assert_int_eq(h.rc, RUN_LOCK_TAKEN);
        read_all(path, text, sizeof text);
        assert_line(text, h.pid, cases[k].says, "\n");
        end_holder(&h, 'e');
        free(path);
    }
}
END_TEST

/* A leftover of two lines: its first line only; a buffer of 8 bytes gets 7 characters and its terminator,
 * nothing past it. A lock file in a missing directory: RUN_LOCK_NO_FILE and why. */
START_TEST(leftover_first_line_within_buffer)
{
    char *path = tu_path(tmpdir, "lock");
    const char *old = "host gone pid 7 since 2026-01-01 00:00:00\nsecond line\n";
    tu_write_file(path, old, strlen(old));
    holder_proc h = start_holder(path, NULL, 512);
    ck_assert_int_eq(h.rc, RUN_LOCK_TAKEN);
    ck_assert_str_eq(h.holder, "host gone pid 7 since 2026-01-01 00:00:00");
    ck_assert(h.intact);
    end_holder(&h, 'e');
    tu_write_file(path, old, strlen(old));
    h = start_holder(path, NULL, 8);
    ck_assert_int_eq(h.rc, RUN_LOCK_TAKEN);
    ck_assert_str_eq(h.holder, "host go");
    ck_assert(h.intact);
    end_holder(&h, 'e');
    free(path);
    char *missing = tu_path(tmpdir, "no/such/lock"), why[128];
    ck_assert_int_eq(run_lock_take(missing, why, sizeof why), RUN_LOCK_NO_FILE);
    ck_assert_str_eq(why, "No such file or directory");
    free(missing);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_lock");
    TCase *tc = tcase_create("run_lock");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, holder_named_and_released);
    tcase_add_test(tc, slurm_job_named);
    tcase_add_test(tc, leftover_first_line_within_buffer);
    suite_add_tcase(s, tc);
    return check_run(s);
}
