/* Fixtures shared by the shard suites (check_shards, check_shards_bad, check_shards_writer): a scratch
 * directory per test case, synthetic data sets parsed back from IDX files, shard sets written from them. */
#ifndef MNIST_SHARDS_TESTUTIL_H
#define MNIST_SHARDS_TESTUTIL_H
#include <stdint.h>

#include "base/sha256.h"

extern char *g_dir; /* created in the parent (unchecked fixture), shared by the forked tests */

/* The unchecked fixture of every test case: g_dir, and HDF5's own error printing off. */
void dir_setup(void);
void dir_teardown(void);

/* A fresh subdirectory of g_dir. */
char *subdir(const char *tag);

typedef struct {
    uint64_t n;
    uint8_t *images, *labels;
    char sha[SHA256_HEX_LEN + 1];
} dataset;

/* Synthetic IDX files written and parsed back, as mnist2h5 does. */
dataset make_data(uint64_t n, uint64_t seed);
void free_data(dataset *d);

/* A written shard set in a fresh directory. */
char *write_set(const dataset *d, int nshards, const char *prefix);

/* dir/ the canonical name of shard i of m, malloc'ed. */
char *shard_path(const char *dir, const char *prefix, int i, int m);
#endif
