#include "base/sha256.h"

#include "base/errors.h"

#include <errno.h>
#include <openssl/evp.h>
#include <sysexits.h>
#include <unistd.h>

/* libcrypto fails only when out of memory or misconfigured (a FIPS provider without SHA-256): fatal. */
static void need(int ok, const char *what)
{
    if (!ok)
        die(EX_SOFTWARE, "OpenSSL's SHA-256 failed in %s (libcrypto out of memory or misconfigured)", what);
}

void sha256_init(sha256_ctx *c)
{
    c->md = EVP_MD_CTX_new();
    need(c->md != NULL, "EVP_MD_CTX_new");
    need(EVP_DigestInit_ex(c->md, EVP_sha256(), NULL), "EVP_DigestInit_ex");
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    need(EVP_DigestUpdate(c->md, data, len), "EVP_DigestUpdate");
}

void sha256_abandon(sha256_ctx *c)
{
    EVP_MD_CTX_free(c->md);
    c->md = NULL;
}

void sha256_final_hex(sha256_ctx *c, char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    need(EVP_DigestFinal_ex(c->md, d, &n) && n == 32, "EVP_DigestFinal_ex");
    sha256_abandon(c);
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[SHA256_HEX_LEN] = '\0';
}

void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_LEN + 1])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final_hex(&c, hex);
}

int sha256_fd_hex(int fd, uint64_t from, char hex[SHA256_HEX_LEN + 1], uint64_t *bytes)
{
    unsigned char buf[1 << 16];
    sha256_ctx c;
    uint64_t total = 0;
    if (lseek(fd, (off_t)from, SEEK_SET) < 0)
        return errno;
    sha256_init(&c);
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int err = errno;
            sha256_abandon(&c);
            return err;
        }
        if (got == 0)
            break;
        sha256_update(&c, buf, (size_t)got);
        total += (uint64_t)got;
    }
    sha256_final_hex(&c, hex);
    if (bytes)
        *bytes = total;
    return 0;
}
