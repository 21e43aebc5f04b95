/* SHA-256 through OpenSSL's libcrypto (EVP, which uses the CPU's SHA extensions or AVX2 itself):
 * mnist2h5 records the digest of the IDX file it converted, manifests and sealed files carry digests of
 * their content. A context is created by sha256_init and freed by sha256_final_hex (or sha256_abandon). */
#ifndef MNIST_SHA256_H
#define MNIST_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *md; /* an EVP_MD_CTX, kept opaque so that callers need no OpenSSL headers */
} sha256_ctx;

#define SHA256_HEX_LEN 64 /* hex digits, without the terminating NUL */

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Write 64 lowercase hex digits plus NUL into hex[SHA256_HEX_LEN + 1] and free the context. */
void sha256_final_hex(sha256_ctx *c, char hex[SHA256_HEX_LEN + 1]);
/* Free a context whose digest is not wanted. */
void sha256_abandon(sha256_ctx *c);
/* One-shot digest of a buffer, as hex. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_LEN + 1]);
/* Digest of an open file's bytes from offset 'from' to its end, as hex; the byte count hashed goes to
 * *bytes when not NULL. Returns 0, or an errno value (the descriptor's position is left anywhere). */
int sha256_fd_hex(int fd, uint64_t from, char hex[SHA256_HEX_LEN + 1], uint64_t *bytes);
#endif
