#define _POSIX_C_SOURCE 200809L
#include "comm/exit_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum { TICK_MS = 50 };

/* 1 when /proc/PID/stat at path says stopped by a signal (state T; t, a tracer's stop, is a debugger's or a leak
 * checker's), 0 otherwise, -1 when it cannot tell.
 * Async-signal-safe calls only: the child of a threaded process may call nothing else. */
static int stopped(const char *path)
{
    char buf[512];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses: the state follows the last */
    return p && p[1] == ' ' ? p[2] == 'T' : -1;
}

/* The child: the pipe's end of file is the parent's exit; a stop counts only while it lasts, so a job suspended
 * and resumed as a whole (Slurm's suspend stops this child too) is never killed for it. */
static void watch(int fd, pid_t parent, const char *path, double seconds, const char *line)
{
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) { /* the launcher's output pipes close when the rank exits, not when this child does */
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
    }
    long stopped_ms = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;
        if (poll(&p, 1, TICK_MS) != 0 && read(fd, &c, 1) <= 0)
            _exit(0);
        int s = stopped(path);
        if (s < 0)
            _exit(0);
        stopped_ms = s ? stopped_ms + TICK_MS : 0;
        if (stopped_ms >= (long)(seconds * 1000)) {
            ssize_t w = write(STDERR_FILENO, line, strlen(line));
            (void)w;
            kill(parent, SIGKILL);
            _exit(0);
        }
    }
}

void exit_watch_start(double seconds, const char *line)
{
    int fds[2];
    char path[64];
    pid_t parent = getpid();
    snprintf(path, sizeof path, "/proc/%d/stat", (int)parent);
    if (stopped(path) < 0 || pipe(fds) != 0)
        return;
    pid_t child = fork();
    if (child == 0) {
        close(fds[1]);
        for (int sig = 1; sig < 32; sig++) /* the rank's handlers (preemption, status) are not this child's */
            if (sig != SIGKILL && sig != SIGSTOP)
                signal(sig, SIG_DFL);
        watch(fds[0], parent, path, seconds, line);
    }
    close(fds[0]);
    if (child < 0)
        close(fds[1]);
    /* fds[1] stays open until this process ends: its end of file tells the child */
}
