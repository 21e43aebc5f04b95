#include "data/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/errors.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

typedef struct {
    const char *path;
    const char *what; /* "images" / "labels" */
    FILE *f;
    int regular;
    uint64_t size; /* file size when regular */
    sha256_ctx sha;
    uint64_t got; /* bytes read so far */
} idx_reader;

static void reader_open(idx_reader *r, const char *path, const char *what)
{
    struct stat st;
    r->path = path;
    r->what = what;
    r->got = 0;
    sha256_init(&r->sha);
    r->f = fopen(path, "rb");
    if (!r->f)
        die(EX_NOINPUT, "cannot open IDX %s file '%s': %s", what, path, strerror(errno));
    if (fstat(fileno(r->f), &st) != 0)
        die(EX_NOINPUT, "cannot stat IDX %s file '%s': %s", what, path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        die(EX_NOINPUT, "IDX %s file '%s' is a directory", what, path);
    r->regular = S_ISREG(st.st_mode);
    r->size = (uint64_t)st.st_size;
}

/* Read exactly n bytes or return how many were there. */
static size_t reader_get(idx_reader *r, void *buf, size_t n)
{
    size_t got = fread(buf, 1, n, r->f);
    if (got < n && ferror(r->f))
        die(EX_IOERR, "error reading IDX %s file '%s': %s", r->what, r->path, strerror(errno));
    sha256_update(&r->sha, buf, got);
    r->got += got;
    return got;
}

static void truncated(idx_reader *r, uint64_t expected)
{
    die(EX_DATAERR, "IDX %s file '%s' is truncated: %llu bytes, expected %llu", r->what, r->path,
        (unsigned long long)r->got, (unsigned long long)expected);
}

/* Header: magic check (with a hint for gzip and for swapped files). */
static void reader_header(idx_reader *r, uint8_t *hdr, size_t len, uint32_t magic, uint32_t other)
{
    size_t got = reader_get(r, hdr, len);
    if (got >= 2 && hdr[0] == 0x1f && hdr[1] == 0x8b)
        die(EX_DATAERR, "IDX %s file '%s' is gzip-compressed: decompress it first (gunzip)", r->what, r->path);
    if (got < 4)
        die(EX_DATAERR, "IDX %s file '%s' is truncated: %zu bytes, too short for an IDX header", r->what, r->path, got);
    uint32_t m = be32(hdr);
    if (m == other)
        die(EX_DATAERR,
            "IDX %s file '%s' has wrong magic 0x%08x (that of an IDX %s file; expected 0x%08x): "
            "are the images and labels files swapped?",
            r->what, r->path, m, other == IDX_LABELS_MAGIC ? "labels" : "images", magic);
    if (m != magic)
        die(EX_DATAERR, "IDX %s file '%s' has wrong magic 0x%08x, expected 0x%08x", r->what, r->path, m, magic);
    if (got < len)
        die(EX_DATAERR, "IDX %s file '%s' is truncated: %zu bytes, too short for its %zu-byte header", r->what, r->path,
            got, len);
}

/* Body of `bytes` bytes, then nothing more. */
static uint8_t *reader_body(idx_reader *r, uint64_t bytes)
{
    uint64_t expected = r->got + bytes;
    if (r->regular && r->size < expected) {
        r->got = r->size;
        truncated(r, expected);
    }
    if (r->regular && r->size > expected)
        die(EX_DATAERR, "IDX %s file '%s' has %llu trailing bytes after the %llu bytes its header describes", r->what,
            r->path, (unsigned long long)(r->size - expected), (unsigned long long)expected);
    if (bytes > SIZE_MAX)
        die(EX_DATAERR, "IDX %s file '%s' is too large for this machine", r->what, r->path);
    uint8_t *data = xmalloc((size_t)bytes);
    if (reader_get(r, data, (size_t)bytes) < bytes)
        truncated(r, expected);
    uint8_t extra[4096];
    size_t more = reader_get(r, extra, sizeof extra);
    if (more) {
        uint64_t total = more;
        while ((more = reader_get(r, extra, sizeof extra)) > 0)
            total += more;
        die(EX_DATAERR, "IDX %s file '%s' has %llu trailing bytes after the %llu bytes its header describes", r->what,
            r->path, (unsigned long long)total, (unsigned long long)expected);
    }
    return data;
}

static void reader_close(idx_reader *r, char *sha256_hex)
{
    fclose(r->f);
    r->f = NULL;
    if (sha256_hex)
        sha256_final_hex(&r->sha, sha256_hex);
    else
        sha256_abandon(&r->sha);
}

uint8_t *idx_read_images(const char *path, uint64_t *count, char *sha256_hex)
{
    idx_reader r;
    uint8_t hdr[16];
    reader_open(&r, path, "images");
    reader_header(&r, hdr, sizeof hdr, IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC);
    uint32_t n = be32(hdr + 4), rows = be32(hdr + 8), cols = be32(hdr + 12);
    if (rows != MNIST_ROWS || cols != MNIST_COLS)
        die(EX_DATAERR, "IDX images file '%s' holds %ux%u images, expected %dx%d (MNIST)", path, rows, cols, MNIST_ROWS,
            MNIST_COLS);
    uint8_t *images = reader_body(&r, (uint64_t)n * MNIST_PIXELS);
    reader_close(&r, sha256_hex);
    *count = n;
    return images;
}

uint8_t *idx_read_labels(const char *path, uint64_t *count, char *sha256_hex)
{
    idx_reader r;
    uint8_t hdr[8];
    reader_open(&r, path, "labels");
    reader_header(&r, hdr, sizeof hdr, IDX_LABELS_MAGIC, IDX_IMAGES_MAGIC);
    uint32_t n = be32(hdr + 4);
    uint8_t *labels = reader_body(&r, n);
    reader_close(&r, sha256_hex);
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] >= MNIST_CLASSES)
            die(EX_DATAERR, "IDX labels file '%s': label %u at index %u is out of range 0..%d", path, labels[i], i,
                MNIST_CLASSES - 1);
    *count = n;
    return labels;
}

void idx_load(const char *images_path, const char *labels_path, idx_set *set)
{
    uint64_t ni = 0, nl = 0;
    memset(set, 0, sizeof *set);
    set->images = idx_read_images(images_path, &ni, set->images_sha256);
    set->labels = idx_read_labels(labels_path, &nl, set->labels_sha256);
    if (ni != nl)
        die(EX_DATAERR, "count mismatch: images file '%s' has %llu images but labels file '%s' has %llu labels",
            images_path, (unsigned long long)ni, labels_path, (unsigned long long)nl);
    set->count = ni;
}

void idx_free(idx_set *set)
{
    free(set->images);
    free(set->labels);
    set->images = set->labels = NULL;
    set->count = 0;
}
