/* A rank's last moments, on a child process that stands for the rank. The watcher (src/comm/exit_watch.c): a
 * rank stopped (SIGSTOP) past the watcher's seconds is killed with the line said once; a running rank whose
 * name holds ") T " (the state in /proc/PID/stat follows the last parenthesis, not the first) is left alone;
 * and the watcher ends when the rank does, before the rank is even reaped, leaving nothing behind. The
 * watchdog (src/base/watchdog.c): its code and line after a fraction of a second, at once for 0 s, nothing
 * once disarmed, and only the last of two arms. */
#define _GNU_SOURCE
#include "../check_run.h"
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/watchdog.h"
#include "comm/exit_watch.h"

typedef struct {
    pid_t pid;
    int err; /* the read end of the rank's stderr, which its watcher shares */
} rank_proc;

/* A child whose stderr is a pipe: it runs body(arg), then exits 0. */
static rank_proc spawn(void (*body)(const void *arg), const void *arg)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        body(arg);
        _exit(0);
    }
    close(fds[1]);
    return (rank_proc){pid, fds[0]};
}

/* Sleeps s seconds, again after a signal's interruption (a SIGSTOP and SIGCONT). */
static void sleep_through(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

typedef struct {
    const char *name;
    int stop;
} rank_spec;

static void rank_body(const void *arg)
{
    const rank_spec *r = arg;
    prctl(PR_SET_NAME, r->name);
    exit_watch_start(0.3, "rank 3 stopped while ending\n");
    if (r->stop)
        raise(SIGSTOP);
    sleep_through(1.5);
}

/* A rank named name that starts its watcher, then stops itself (stop) or sleeps 1.5 s and exits 0. */
static rank_proc start_rank(const char *name, int stop)
{
    rank_spec r = {name, stop};
    return spawn(rank_body, &r);
}

/* What the rank's stderr says until every writer has closed it; -1 if that takes over 10 s. */
static int read_to_end(int fd, char *buf, size_t len)
{
    size_t n = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1)
            return -1;
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return 0;
}

START_TEST(stopped_rank_killed)
{
    rank_proc r = start_rank("mnist_ddp", 1);
    char out[256];
    ck_assert_int_eq(read_to_end(r.err, out, sizeof out), 0);
    ck_assert_str_eq(out, "rank 3 stopped while ending\n");
    int st;
    ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x, not killed by SIGKILL", st);
    close(r.err);
}
END_TEST

START_TEST(running_rank_left_alone)
{
    static const char *const names[] = {"mnist_ddp", "a) T (b", "x) T y"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        rank_proc r = start_rank(names[k], 0);
        char out[256];
        /* End of file with the rank not yet reaped (a zombie): its watcher ended on the pipe's end alone. */
        ck_assert_msg(read_to_end(r.err, out, sizeof out) == 0, "'%s': the watcher outlived its rank", names[k]);
        ck_assert_msg(out[0] == '\0', "'%s': the watcher said '%s'", names[k], out);
        int st;
        ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "'%s': status %#x", names[k], st);
        close(r.err);
    }
}
END_TEST

/* Stops of 0.15 s, five in a row with 0.15 s of running between them: 0.75 s stopped in all, past the watcher's
 * 0.6 s, but each stop counts only while it lasts (a job suspended and resumed), so the rank lives. */
static void stops_body(const void *arg)
{
    (void)arg;
    exit_watch_start(0.6, "stopped too long\n");
    sleep_through(2);
}

START_TEST(separate_stops_do_not_add_up)
{
    rank_proc r = spawn(stops_body, NULL);
    struct timespec pause = {0, 150000000};
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(kill(r.pid, SIGSTOP), 0);
        nanosleep(&pause, NULL);
        ck_assert_int_eq(kill(r.pid, SIGCONT), 0);
        nanosleep(&pause, NULL);
    }
    char out[256];
    ck_assert_int_eq(read_to_end(r.err, out, sizeof out), 0);
    ck_assert_msg(out[0] == '\0', "the watcher said '%s' after stops shorter than its time", out);
    int st;
    ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
    close(r.err);
}
END_TEST

/* ---- The watchdog ----------------------------------------------------------------------------------- */

static void armed_body(const void *arg)
{
    int which = *(const int *)arg;
    if (which == 0)
        watchdog_arm(0.2, 69, "stalled in MPI_Finalize");
    else if (which == 1)
        watchdog_arm(0, 71, "at once");
    else if (which == 2) {
        watchdog_arm(0.2, 69, "disarmed");
        watchdog_disarm();
    } else {
        watchdog_arm(0.1, 70, "first");
        watchdog_arm(0.4, 69, "second");
    }
    sleep_through(1.5);
}

/* A child that arms the watchdog as case `which` says, then sleeps 1.5 s and exits 0; its status and what it
 * said. */
static int run_armed(int which, char *out, size_t len)
{
    int st;
    rank_proc r = spawn(armed_body, &which);
    ck_assert_int_eq(read_to_end(r.err, out, len), 0);
    close(r.err);
    ck_assert_int_eq(waitpid(r.pid, &st, 0), r.pid);
    ck_assert_msg(WIFEXITED(st), "case %d: status %#x", which, st);
    return WEXITSTATUS(st);
}

START_TEST(watchdog_codes_and_lines)
{
    static const struct {
        int code;
        const char *says;
    } want[] = {{69, "stalled in MPI_Finalize\n"}, {71, "at once\n"}, {0, ""}, {69, "second\n"}};
    for (int k = 0; k < 4; k++) {
        char out[256];
        ck_assert_int_eq(run_armed(k, out, sizeof out), want[k].code);
        ck_assert_str_eq(out, want[k].says);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("exit_watch");
    TCase *tc = tcase_create("exit_watch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stopped_rank_killed);
    tcase_add_test(tc, running_rank_left_alone);
    tcase_add_test(tc, separate_stops_do_not_add_up);
    tcase_add_test(tc, watchdog_codes_and_lines);
    suite_add_tcase(s, tc);
    return check_run(s);
}
