/* IDX files, the format the original MNIST distribution uses (big-endian header, then uint8 data):
 *   images: magic 0x00000803, count, rows, cols, then count*rows*cols pixels (row-major);
 *   labels: magic 0x00000801, count, then count labels.
 * The readers accept exactly 28x28 images and labels 0..9, and reject everything else with one line
 * naming the file and the problem:
 * - a missing or unreadable file exits EX_NOINPUT (66);
 * - a wrong magic, a gzip-compressed file, a truncated file, trailing bytes, a wrong image size, a label > 9,
 *   or an image/label count mismatch exits EX_DATAERR (65). */
#ifndef MNIST_IDX_H
#define MNIST_IDX_H
#include <stdint.h>
#include "data/mnist.h"
#include "base/sha256.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u

/* Read an images file: returns count * MNIST_PIXELS bytes (free()), sets *count. If sha256_hex is not NULL
 * it receives the SHA-256 of the whole file (header included) as 64 hex digits. */
uint8_t *idx_read_images(const char *path, uint64_t *count, char *sha256_hex);
/* Read a labels file: returns count bytes, each 0..9 (free()), sets *count. */
uint8_t *idx_read_labels(const char *path, uint64_t *count, char *sha256_hex);

/* A matching pair of files, as mnist2h5 converts them. */
typedef struct {
    uint64_t count;
    uint8_t *images; /* count * MNIST_PIXELS */
    uint8_t *labels; /* count */
    char images_sha256[SHA256_HEX_LEN + 1];
    char labels_sha256[SHA256_HEX_LEN + 1];
} idx_set;

/* Both files, plus the count check (EX_DATAERR naming both files when they disagree). */
void idx_load(const char *images_path, const char *labels_path, idx_set *set);
void idx_free(idx_set *set);
#endif
