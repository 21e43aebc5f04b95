/* What every libFuzzer harness of tests/fuzz shares: fatal errors that return instead of ending the process,
 * and a private scratch directory for the input written as a file (the readers under test take paths). */
#ifndef MNIST_FUZZ_COMMON_H
#define MNIST_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>

/* Runs fn(arg). Returns -1 when it returned, else the exit status it died with (die(), die_all(),
 * exit_all()); after a death the HDF5 objects and file descriptors it left open are closed, so a
 * long campaign does not run out of either. What it left allocated is not a leak of the product, which
 * exits there; the harnesses run with detect_leaks=0 for that reason. */
int fuzz_call(void (*fn)(void *), void *arg);

/* A fresh directory under $TMPDIR (default /tmp), created on first use, removed at exit with what is in it. */
const char *fuzz_scratch_dir(void);
/* dir/name with the bytes data[0..size), replacing it; returns the path (static storage). */
const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size);
#endif
