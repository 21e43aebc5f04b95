/* Shard-set manifests: "<prefix>.manifest" beside the shards lists every file of the set with its
 * sample count, byte size and SHA-256. So the reader can prove every byte intact before the HDF5
 * library parses a file (HDF5 does not survive every malformed file: damaged metadata can crash it).
 *
 * Format (text, one record a line, written by shards_write after the shards are complete):
 *   mnist_ddp-shard-manifest 1
 *   prefix <prefix>
 *   shards <M>
 *   total_samples <N>
 *   source_sha256 <64 hex digits, or "-" when none was recorded>
 *   file <name> <samples> <bytes> <sha256>        (M lines, shard 0 first)
 *   manifest_sha256 <SHA-256 of every byte before this line>
 * The last line makes any damage to the manifest itself a clear error rather than a wrong claim. */
#ifndef MNIST_MANIFEST_H
#define MNIST_MANIFEST_H
#include <stdint.h>

#include "base/sha256.h"
#include "data/shard_names.h"

typedef struct {
    char *name; /* file name within the directory */
    uint64_t samples, bytes;
    char sha256[SHA256_HEX_LEN + 1];
} manifest_file;

typedef struct {
    char *path; /* of the manifest, for messages */
    int count;  /* shard files */
    uint64_t total;
    char source_sha256[SHA256_HEX_LEN + 1]; /* "" when none */
    manifest_file *f;
} manifest;

/* "dir/<prefix>.manifest", malloc'ed. */
char *manifest_path(const char *dir, const char *prefix);

/* Size and SHA-256 of the regular file at path into *bytes and hex. Returns 0, an errno value, or
 * -1 if path is not a regular file (a directory, a FIFO: never waited on). */
int manifest_hash_file(const char *path, uint64_t *bytes, char hex[SHA256_HEX_LEN + 1]);

/* Create tmp exclusively (O_CREAT|O_EXCL, mode 0666 less the umask), write the manifest of m (its path
 * is unused) and fsync it. Returns 0 or an errno value; tmp may exist after a failure (the caller
 * removes it). */
int manifest_write(const char *tmp, const char *prefix, const manifest *m);

/* The manifest of dir's <prefix> set, or NULL if there is none. A manifest that exists but cannot be
 * read, or is damaged or implausible, dies EX_DATAERR (EX_NOINPUT if unreadable) with one line. */
manifest *manifest_load(const char *dir, const char *prefix);

/* Check the shard files found in dir (v[0..n), from shard_scan_dir) against m before anything parses
 * them: the same names (a listed file missing: EX_NOINPUT; a file not listed: EX_DATAERR), then each
 * file's size and SHA-256 (EX_DATAERR naming the file). */
void manifest_verify(const manifest *m, const char *dir, const shard_entry *v, size_t n);

void manifest_free(manifest *m);
#endif
