/* libFuzzer harness: the IDX parser (src/data/idx.c) on arbitrary bytes, read as an images file and as a labels
 * file. Besides the sanitizers, an accepted file must be exactly what its header describes. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "data/idx.h"

typedef struct {
    const char *path;
    const uint8_t *data;
    size_t size;
} input;

static void read_images(void *arg)
{
    const input *in = arg;
    uint64_t n = 0;
    char hex[SHA256_HEX_LEN + 1];
    uint8_t *px = idx_read_images(in->path, &n, hex);
    if (in->size != 16 + n * MNIST_PIXELS || memcmp(px, in->data + 16, in->size - 16) != 0)
        abort(); /* accepted, but not the file's pixels */
    free(px);
}

static void read_labels(void *arg)
{
    const input *in = arg;
    uint64_t n = 0;
    uint8_t *lab = idx_read_labels(in->path, &n, NULL);
    if (in->size != 8 + n || memcmp(lab, in->data + 8, n) != 0)
        abort();
    for (uint64_t i = 0; i < n; i++)
        if (lab[i] >= MNIST_CLASSES)
            abort();
    free(lab);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {fuzz_write_file("input.idx", data, size), data, size};
    fuzz_call(read_images, &in);
    fuzz_call(read_labels, &in);
    return 0;
}
