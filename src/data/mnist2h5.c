/* mnist2h5: convert a pair of MNIST IDX files into HDF5 shards (see src/data/shards.h for the layout). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "data/idx.h"
#include "data/shards.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: mnist2h5 --images FILE --labels FILE --out DIR --shards N [--prefix NAME]\n"
            "Convert MNIST IDX files (uncompressed) into N HDF5 shard files\n"
            "DIR/NAME-00000-of-0000N.h5 ... for data-parallel training.\n"
            "\n"
            "  --images FILE   IDX images file (magic 0x00000803, 28x28 uint8)\n"
            "  --labels FILE   IDX labels file (magic 0x00000801, labels 0..9)\n"
            "  --out DIR       output directory (created if missing)\n"
            "  --shards N      number of shard files, 1..min(samples, %d)\n"
            "  --prefix NAME   file name prefix (default: train; use test for the test set)\n"
            "  --help          show this help and exit\n"
            "  --version       show the version and exit\n"
            "\n"
            "Each file holds /images uint8 [n,28,28] and /labels uint8 [n] (chunked, Fletcher-32)\n"
            "and the root attributes shard_index, shard_count, total_samples, first_index,\n"
            "num_samples, source_sha256 (of the images file) and prefix. DIR/NAME.manifest lists\n"
            "every file's samples, size and SHA-256; readers check it before parsing a shard. Files\n"
            "are written under temporary names and renamed only once all are complete, the manifest last.\n"
            "Exit status: 0 ok, 64 usage, 65 bad input data, 66 missing input, 73 cannot create output.\n",
            SHARDS_MAX);
}

static _Noreturn void usage_error(const char *msg, const char *arg)
{
    die(EX_USAGE, "%s%s%s (see mnist2h5 --help)", msg, arg ? " " : "", arg ? arg : "");
}

typedef struct {
    const char *images, *labels, *out, *shards, *prefix;
} args;

/* The options, each required one present and non-empty; --help and --version exit here. */
static args parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"images", required_argument, NULL, 'i'}, {"labels", required_argument, NULL, 'l'},
        {"out", required_argument, NULL, 'o'},    {"shards", required_argument, NULL, 's'},
        {"prefix", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0},
    };
    args a = {.prefix = "train"};
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        switch (c) {
        case 'i':
            a.images = optarg;
            break;
        case 'l':
            a.labels = optarg;
            break;
        case 'o':
            a.out = optarg;
            break;
        case 's':
            a.shards = optarg;
            break;
        case 'p':
            a.prefix = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("mnist2h5 (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
            exit(0);
        case ':':
            usage_error("option needs a value:", argv[optind - 1]);
        default:
            usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument", argv[optind]);
    if (!a.images)
        usage_error("missing option --images", NULL);
    if (!a.labels)
        usage_error("missing option --labels", NULL);
    if (!a.out)
        usage_error("missing option --out", NULL);
    if (!a.shards)
        usage_error("missing option --shards", NULL);
    if (!*a.images || !*a.labels || !*a.out)
        usage_error("empty file name given to", !*a.images ? "--images" : !*a.labels ? "--labels" : "--out");
    return a;
}

int main(int argc, char **argv)
{
    error_set_program("mnist2h5");
    args a = parse_args(argc, argv);
    const char *images = a.images, *prefix = a.prefix;
    char *end = NULL;
    errno = 0;
    long nshards = strtol(a.shards, &end, 10);
    if (errno || end == a.shards || *end || nshards < 1 || nshards > SHARDS_MAX)
        die(EX_USAGE, "invalid --shards '%s': expected an integer 1..%d (see mnist2h5 --help)", a.shards, SHARDS_MAX);
    if (!shards_prefix_ok(prefix))
        die(EX_USAGE,
            "invalid --prefix '%s': use letters, digits, '_', '.', '-' (not first), at most 64 "
            "(see mnist2h5 --help)",
            prefix);

    idx_set set;
    idx_load(images, a.labels, &set);
    if (set.count == 0)
        die(EX_DATAERR, "IDX files '%s' and '%s' hold no samples", images, a.labels);
    if ((uint64_t)nshards > set.count)
        die(EX_USAGE, "invalid --shards %ld: more shards than the %llu samples of '%s'", nshards,
            (unsigned long long)set.count, images);
    shards_write(a.out, prefix, (int)nshards, set.images, set.labels, set.count, set.images_sha256);

    char first[512], last[512];
    shards_name(first, sizeof first, prefix, 0, (int)nshards);
    shards_name(last, sizeof last, prefix, (int)nshards - 1, (int)nshards);
    printf("mnist2h5: wrote %llu samples (%s) to %s/%s%s%s\n", (unsigned long long)set.count, images, a.out, first,
           nshards > 1 ? " .. " : "", nshards > 1 ? last : "");
    idx_free(&set);
    return 0;
}
