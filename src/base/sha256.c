#include "base/sha256.h"

#include "base/sha256_blocks.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static inline uint32_t ror(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t p[64])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void sha256_blocks_c(uint32_t h[8], const uint8_t *p, size_t blocks)
{
    for (; blocks; blocks--, p += 64)
        block(h, p);
}

static void blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
    static int hw = -1; /* CPUID once (a VM traps it): the same answer on every call and thread */
    if (hw < 0)
        hw = sha256_shani_usable();
    if (hw)
        sha256_blocks_shani(h, p, n);
    else
        sha256_blocks_c(h, p, n);
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
    c->used = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->bytes += len;
    if (c->used) {
        size_t take = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->buf + c->used, p, take);
        c->used += take;
        p += take;
        len -= take;
        if (c->used < 64)
            return;
        blocks(c->h, c->buf, 1);
        c->used = 0;
    }
    blocks(c->h, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
    memcpy(c->buf, p, len);
    c->used = len;
}

void sha256_final(sha256_ctx *c, uint8_t digest[32])
{
    uint64_t bits = c->bytes * 8;
    c->buf[c->used++] = 0x80;
    if (c->used > 56) {
        memset(c->buf + c->used, 0, 64 - c->used);
        blocks(c->h, c->buf, 1);
        c->used = 0;
    }
    memset(c->buf + c->used, 0, 56 - c->used);
    for (int i = 0; i < 8; i++)
        c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    blocks(c->h, c->buf, 1);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(c->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)c->h[i];
    }
    c->used = 0;
}

void sha256_final_hex(sha256_ctx *c, char hex[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t d[32];
    sha256_final(c, d);
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
    uint8_t buf[1 << 14];
    sha256_ctx c;
    uint64_t total = 0;
    if (lseek(fd, (off_t)from, SEEK_SET) < 0)
        return errno;
    sha256_init(&c);
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno;
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
