/* MNIST shards: the training (or test) set split into HDF5 files that any number of ranks read
 * independently, each only the samples it needs.
 *
 * A shard set is the files "<prefix>-NNNNN-of-MMMMM.h5" in one directory (5-digit zero-padded
 * shard index and count; prefix "train" or "test"). Shard i holds the samples
 * [first_index, first_index + num_samples) of the original IDX order. Concatenating the shards in
 * index order gives back the IDX order exactly, and shard sizes differ by at most one (the first
 * n % M shards get one more). Each file has:
 *   /images  uint8 [n, 28, 28], chunked along n (1024 images per chunk, fewer if n is smaller)
 *   /labels  uint8 [n], values 0..9, chunked along n
 *   both with the Fletcher-32 checksum filter, and on the root group the attributes
 *   shard_index, shard_count (uint32), total_samples, first_index, num_samples (uint64),
 *   source_sha256 (SHA-256 of the images IDX file) and prefix (fixed-length ASCII strings).
 * The shard count and the number of ranks are independent: the reader maps a global sample index
 * to (shard, local index) through the first_index attributes. Beside the shards, "<prefix>.manifest"
 * (src/data/manifest.h) lists every file's sample count, size and SHA-256: the reader checks it before the
 * HDF5 library parses any file; a set without one is read with a warning (unverified).
 *
 * The code: src/data/shard_names.c (names, directory scan), src/data/shard_read.c (open, validate, read
 * ranges), src/data/shard_write.c (the atomic writer), on the HDF5 helpers of src/data/h5util.c.
 *
 * Errors are one line naming the file and the problem (HDF5's own error-stack printing is turned
 * off by these functions):
 * - EX_NOINPUT (66) for no shards or a missing file;
 * - EX_DATAERR (65) for an inconsistent set or bad content;
 * - EX_CANTCREAT (73) when the output cannot be created. */
#ifndef MNIST_SHARDS_H
#define MNIST_SHARDS_H
#include <stddef.h>
#include <stdint.h>

#define SHARDS_MAX             99999 /* five digits in the file names */
#define SHARDS_IMAGES_CHUNK    1024  /* images per HDF5 chunk */
#define SHARDS_LABELS_CHUNK    65536 /* labels per HDF5 chunk */
/* Resource bounds, checked before anything is allocated from what a file declares. A set holds at most 2^24
 * samples (13 GB of images, 280 times MNIST), an HDF5 chunk at most 64 MiB (the library allocates whole chunks
 * while reading; mnist2h5 writes 0.8 MB chunks). Larger is damage, not data. */
#define SHARDS_MAX_SAMPLES     (UINT64_C(1) << 24)
#define SHARDS_MAX_CHUNK_BYTES (UINT64_C(64) << 20)

typedef struct shard_set shard_set;

/* Open every "<prefix>-NNNNN-of-MMMMM.h5" in dir and validate the set:
 * - all M files present, no gap, duplicate or extra file;
 * - the sizes and SHA-256 of "<prefix>.manifest" when there is one, checked before any file is parsed (a
 *   damaged manifest or file dies EX_DATAERR naming it; without one rank 0 warns once);
 * - declared sizes within SHARDS_MAX_SAMPLES / SHARDS_MAX_CHUNK_BYTES, and the set (twice) within this
 *   process's memory (EX_OSERR otherwise);
 * - uint8 datasets of shapes [n,28,28] and [n];
 * - attributes that agree: shard index and count match the name, the same total_samples and source_sha256
 *   everywhere, first_index contiguous, counts adding up to total_samples.
 * Dies with a clear line: EX_NOINPUT for no shards or a missing file, EX_DATAERR for inconsistency or bad
 * content. Files starting with '.' (a writer's temporaries) are ignored. */
shard_set *shards_open(const char *dir, const char *prefix);
uint64_t shards_total(const shard_set *s); /* total samples */
int shards_files(const shard_set *s);      /* number of shard files */
/* The source_sha256 attribute, "" if the files have none: the training set's identity in checkpoints. */
const char *shards_source_sha256(const shard_set *s);

/* Read the samples [first, first+count) of the IDX order into images[count*784], labels[count]
 * (either may be NULL to skip that dataset), across shard boundaries: one HDF5 hyperslab per shard
 * it touches. A range beyond shards_total dies EX_SOFTWARE; labels > 9 and Fletcher-32 checksum
 * failures die EX_DATAERR naming the file. count = 0 reads nothing. */
void shards_read_range(shard_set *s, uint64_t first, uint64_t count, uint8_t *images, uint8_t *labels);
void shards_close(shard_set *s);

/* Writer used by mnist2h5 (and tests): write n samples split into nshards files under dir (created
 * if missing) with the prefix, atomically.
 * - Every file is written under a temporary name ".<name>.tmp.<pid>" and renamed only after all shards are
 *   complete; on failure (and on SIGINT, SIGTERM, SIGHUP) the temporaries are removed.
 * - Shard files of the same prefix left by an earlier conversion with a different shard count are removed
 *   afterwards (with a warning), so the directory holds one consistent set.
 * - The manifest "<prefix>.manifest" is written (to an exclusive temporary) after the shards and renamed last.
 * source_sha256: lowercase hex SHA-256 recorded as an attribute and in the manifest (NULL: empty). Dies
 * EX_CANTCREAT (73) if dir cannot be created or written, EX_USAGE for a bad prefix or shard count
 * (1..min(n, 99999)), EX_DATAERR for a label > 9. */
void shards_write(const char *dir, const char *prefix, int nshards, const uint8_t *images, const uint8_t *labels,
                  uint64_t n, const char *source_sha256);

/* "<prefix>-NNNNN-of-MMMMM.h5" into buf; returns buf. */
char *shards_name(char *buf, size_t len, const char *prefix, int index, int count);
/* 1 if prefix is usable in file names: [A-Za-z0-9_.-], not starting with '.' or '-', <= 64 chars. */
int shards_prefix_ok(const char *prefix);
#endif
