/* Helpers shared by the data-layer Check suites (check_idx, check_shards, check_sampler). */
#ifndef MNIST_DATA_TESTUTIL_H
#define MNIST_DATA_TESTUTIL_H
#include <stddef.h>
#include <stdint.h>

/* A fresh directory under $TMPDIR (or /tmp); dies on failure. Free the string. */
char *tu_mkdtemp(const char *tag);
/* rm -rf. */
void tu_rmrf(const char *path);
/* dir/name, malloc'ed. */
char *tu_path(const char *dir, const char *name);
/* Deterministic synthetic samples: every image differs (its first 4 bytes encode its index). */
void tu_synth(uint64_t n, uint64_t seed, uint8_t **images, uint8_t **labels);
/* IDX files of count samples (the writer side of src/data/idx.h, for synthetic data); dies EX_CANTCREAT
 * / EX_IOERR naming the file. */
void tu_write_idx_images(const char *path, const uint8_t *images, uint64_t count);
void tu_write_idx_labels(const char *path, const uint8_t *labels, uint64_t count);
/* Write bytes to a file (truncating). */
void tu_write_file(const char *path, const void *data, size_t len);
/* Copy a file. */
void tu_copy_file(const char *from, const char *to);
/* Run fn(arg) in a child with stderr captured into err[errlen]; returns the exit status, or
 * 128 + signal number if it was killed. */
int tu_run(void (*fn)(void *), void *arg, char *err, size_t errlen);
/* Sorted, space-separated names in dir (hidden ones included, not . and ..) into buf. */
void tu_listdir(const char *dir, char *buf, size_t len);
/* Number of entries of dir whose name contains `part` (NULL: all). */
int tu_count(const char *dir, const char *part);
/* An environment variable if set and non-empty, else NULL. */
const char *tu_env(const char *name);
#endif
