/* Output for Slurm logs and tools: progress lines on stdout (rank 0 only unless --verbose; plain
 * newlines, never carriage returns) and JSON lines in the --metrics file (rank 0). */
#ifndef MNIST_LOG_H
#define MNIST_LOG_H

/* Collective: rank 0 opens the metrics file; every rank stops (73) if it cannot. */
void log_init(int rank, int verbose, const char *metrics_path);
/* Rank 0 (or, with --verbose, every rank, prefixed "[rank R]") prints one line. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Rank 0 appends one JSON object (the caller formats the fields) as a line of the metrics file. */
void metrics(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_close(void);
#endif
