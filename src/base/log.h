/* Output for Slurm logs and tools: progress lines on stdout (rank 0 only unless --verbose; plain
 * newlines, no carriage returns, unless stdout is a terminal) and JSON lines in the --metrics file (rank 0). */
#ifndef MNIST_LOG_H
#define MNIST_LOG_H
#include <stddef.h>

/* Rank 0 opens the metrics file (metrics_path NULL: none): 0, or on rank 0 the errno why it cannot (the caller
 * shares rank 0's verdict and stops every rank). */
int log_init(int verbose, const char *metrics_path);
/* After log_init: own_tty says that stdout, when a terminal, is the user's (a process started alone), not
 * one an MPI launcher made for its ranks (mpirun gives them pseudo-terminals even when its own output goes
 * to a file). Only then do progress lines update in place. */
void log_use_terminal(int own_tty);
/* Rank 0 (or, with --verbose, every rank, prefixed "[rank R]") prints one line. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A progress line: as say(), except that on the user's terminal (own_tty, without --verbose) each one replaces the last
 * ("\r", erase to the end of the line) until the next say(). In a pipe or a file: say(). */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds as "M:SS" or "H:MM:SS" (rounded to whole seconds; "?" when not finite or negative), in buf. */
const char *log_duration(double s, char *buf, size_t size);
/* Rank 0 appends one JSON object (the caller formats the fields) as a line of the metrics file. */
void metrics(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_close(void);
#endif
