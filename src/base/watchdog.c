#define _POSIX_C_SOURCE 200809L
#include "base/watchdog.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char message[1200];
static size_t message_len;
static volatile sig_atomic_t exit_code;

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, message, message_len);
    (void)w;
    _exit(exit_code);
}

void watchdog_arm(double seconds, int code, const char *line)
{
    watchdog_disarm();
    snprintf(message, sizeof message, "%s\n", line);
    message_len = strlen(message);
    exit_code = code;
    struct sigaction sa = {.sa_handler = on_alarm};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    if (seconds < 0.001)
        seconds = 0.001;
    struct itimerval t = {.it_value = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)}};
    setitimer(ITIMER_REAL, &t, NULL);
}

void watchdog_disarm(void)
{
    int saved = errno;
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    errno = saved;
}
