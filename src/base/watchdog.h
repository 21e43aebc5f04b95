/* A last resort for waits nothing else can bound: MPI_Init, MPI_Finalize, MPI_Abort, a collective without a
 * nonblocking form. Armed, it ends the process with its code and its one line after the given seconds, from a
 * signal handler (SIGALRM), whatever the process is blocked in; disarmed, nothing happens. One at a time. */
#ifndef MNIST_WATCHDOG_H
#define MNIST_WATCHDOG_H

/* After seconds: the line (a newline is added) on stderr, then _exit(code). Rearming replaces the last. */
void watchdog_arm(double seconds, int code, const char *line);
void watchdog_disarm(void);
#endif
