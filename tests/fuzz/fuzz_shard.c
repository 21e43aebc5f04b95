/* libFuzzer harness: opening and validating a shard set (shards_open) whose one shard is the input, then
 * reading its first and last samples (shards_read_range), as the trainer does. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "data/mnist.h"
#include "data/shards.h"

enum { READ_MAX = 256 }; /* samples read from each end: enough to cross chunks, bounded memory */

static uint8_t images[READ_MAX * MNIST_PIXELS], labels[READ_MAX];

static void open_and_read(void *dir)
{
    shard_set *s = shards_open(dir, "train");
    uint64_t total = shards_total(s), k = total < READ_MAX ? total : READ_MAX;
    shards_read_range(s, 0, k, images, labels);
    shards_read_range(s, total - k, k, images, labels);
    for (uint64_t i = 0; i < k; i++)
        if (labels[i] >= MNIST_CLASSES)
            abort(); /* the reader promises labels 0..9 */
    shards_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file("train-00000-of-00001.h5", data, size);
    fuzz_call(open_and_read, (void *)fuzz_scratch_dir());
    return 0;
}
