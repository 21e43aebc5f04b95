/* SHA-256's compression function over whole 64-byte blocks (sha256.c's engine): portable C, and the x86 SHA
 * extensions' where the build and the CPU have them (12x the portable speed here: the shard manifests hash
 * every file a rank opens). sha256_update takes the fastest; tests compare the two. */
#ifndef MNIST_SHA256_BLOCKS_H
#define MNIST_SHA256_BLOCKS_H
#include "config.h"

#include <stddef.h>
#include <stdint.h>

extern const uint32_t sha256_k[64]; /* the round constants */

void sha256_blocks_c(uint32_t h[8], const uint8_t *p, size_t blocks);

#ifdef HAVE_SHA_NI
int sha256_shani_usable(void);
void sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t blocks);
#else
static inline int sha256_shani_usable(void) { return 0; } /* not an x86 build, or no SHA intrinsics */
static inline void sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t blocks)
{
    sha256_blocks_c(h, p, blocks);
}
#endif
#endif
