/* libFuzzer harness: the command-line parser (src/train/options.c), and its early read of --device. The input
 * is the arguments, separated by NUL bytes (tests/fuzz/options.dict lists the option names). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "train/options.h"

enum { MAX_ARGS = 64 };

typedef struct {
    int argc;
    char **argv;
} args;

static void parse(void *arg)
{
    args *a = arg;
    options o;
    optind = 0;                                             /* glibc: restart getopt's scan, as for a new process */
    device_choice early = options_device(a->argc, a->argv); /* never stops: a bad value reads as auto */
    options_parse(a->argc, a->argv, &o);
    if (o.device != early)
        abort(); /* the early read (before MPI_Init) disagreed with the parse that accepted the arguments */
    if (o.checkpoint_every && !o.checkpoint_dir)
        abort(); /* accepted a combination the parser promises to refuse */
    if (o.batch_size < 0 || o.accum_steps < 1 || o.epochs < 0 || !o.data_dir || (int)o.model < 0 ||
        o.model >= MODEL_KINDS || o.optimizer < -1 || o.optimizer >= OPTIM_KINDS)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *argv[MAX_ARGS + 2] = {"mnist_ddp"};
    memcpy(buf, data, size);
    buf[size] = 0;
    args a = {1, argv};
    for (char *p = buf; p <= buf + size && a.argc <= MAX_ARGS; p += strlen(p) + 1)
        argv[a.argc++] = p;
    argv[a.argc] = NULL;
    fuzz_call(parse, &a);
    free(buf);
    return 0;
}
