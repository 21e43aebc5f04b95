/* SHA-256 (FIPS 180-4), small and dependency-free: mnist2h5 records the digest of the IDX file it
 * converted, so a shard set can be traced back to (and checked against) its source. */
#ifndef MNIST_SHA256_H
#define MNIST_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;     /* message length so far */
    uint8_t buf[64];    /* pending partial block */
    size_t used;
} sha256_ctx;

#define SHA256_HEX_LEN 64 /* hex digits, without the terminating NUL */

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* Finish and write 64 lowercase hex digits plus NUL into hex[SHA256_HEX_LEN + 1]. */
void sha256_final_hex(sha256_ctx *c, char hex[SHA256_HEX_LEN + 1]);
/* One-shot digest of a buffer, as hex. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_LEN + 1]);
/* Digest of an open file's bytes from offset 'from' to its end, as hex; the byte count hashed goes to
 * *bytes when not NULL. Returns 0, or an errno value (the descriptor's position is left anywhere). */
int sha256_fd_hex(int fd, uint64_t from, char hex[SHA256_HEX_LEN + 1], uint64_t *bytes);
#endif
