/* Shard file names and the directory scan that the reader (src/data/shard_read.c) and the writer
 * (src/data/shard_write.c) share. The public part, shards_name and shards_prefix_ok, is in shards.h. */
#ifndef MNIST_SHARD_NAMES_H
#define MNIST_SHARD_NAMES_H
#include <stddef.h>

typedef struct {
    char *name;
    int index, count;
} shard_entry;

/* Every "<prefix>-NNNNN-of-MMMMM.h5" in dir, sorted by (count, index), into *out (free with
 * shard_entries_free). Names starting with '.' (a writer's temporaries) are skipped. Returns -1 if
 * dir cannot be opened (errno set). A look-alike that is not canonical (other padding, a number
 * above SHARDS_MAX) dies EX_DATAERR, or is skipped if `lenient`. */
int shard_scan_dir(const char *dir, const char *prefix, int lenient, shard_entry **out, size_t *nout);
void shard_entries_free(shard_entry *v, size_t n);

/* "dir/name", malloc'ed. */
char *shard_join(const char *dir, const char *name);
#endif
