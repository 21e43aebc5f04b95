/* shard_load DIR PREFIX...: open each shard set and read all of it, through the calls the trainer's
 * load_data makes (shards_open, shards_read_range), without MPI: the smallest program on the reader's
 * code path, for tests that run it many times (shard-corruption.sh). Exit status and error line are
 * the reader's own. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/errors.h"
#include "data/idx.h"
#include "data/shards.h"

int main(int argc, char **argv)
{
    error_set_program("shard_load");
    if (argc < 3)
        die(EX_USAGE, "usage: shard_load DIR PREFIX...");
    for (int k = 2; k < argc; k++) {
        shard_set *s = shards_open(argv[1], argv[k]);
        uint64_t n = shards_total(s);
        uint8_t *images = xmalloc_aligned(n * MNIST_PIXELS), *labels = xmalloc(n);
        shards_read_range(s, 0, n, images, labels);
        printf("%s: %llu samples in %d files\n", argv[k], (unsigned long long)n, shards_files(s));
        free(images);
        free(labels);
        shards_close(s);
    }
    return 0;
}
