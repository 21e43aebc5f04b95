#include "config.h"

#include "train/options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "gpu/gpu_plan.h"

static const char usage_text[] =
    "Usage: mnist_ddp [OPTION]...\n"
    "Data-parallel MNIST training: one MPI rank per CPU socket share or GPU; gradients averaged\n"
    "with MPI (CPU) or NCCL (GPU). Launch with mpirun -np N, srun --mpi=pmix, or alone.\n"
    "\n"
    "Recipe (defaults follow the PyTorch MNIST example; per-model defaults in brackets):\n"
    "  --model NAME            net | convnet                                   [net]\n"
    "  --batch-size N          training samples per rank per step            [64 | 100]\n"
    "  --test-batch-size N     samples per evaluation read                        [1000]\n"
    "  --epochs N              passes over the training set; 0 = evaluate only      [14]\n"
    "  --lr F                  learning rate                    [1.0 | 1e-4 x world size]\n"
    "  --gamma F               StepLR decay of the learning rate per epoch           [0.7]\n"
    "  --optimizer NAME        adadelta | sgd                        [adadelta | sgd]\n"
    "  --momentum F            SGD momentum                                          [0]\n"
    "  --weight-decay F        L2 penalty added to the gradient                      [0]\n"
    "  --accum-steps N         micro-batches per optimizer step (one all-reduce)     [1]\n"
    "  --seed N                seed of init, shuffle and dropout                     [1]\n"
    "  --max-steps N           stop after N optimizer steps in total (0 = no limit)   [0]\n"
    "  --dry-run               one step, one epoch: a quick check of the setup\n"
    "\n"
    "Data and files:\n"
    "  --data DIR              directory of HDF5 shards from 'make data'    [data/mnist]\n"
    "  --save-model PATH       write the final model (HDF5, state_dict names)\n"
    "  --load-model PATH       start from a model written by --save-model\n"
    "  --metrics FILE          JSON lines: one per logged step and epoch, and a summary\n"
    "  --log-interval N        steps between progress lines                         [10]\n"
    "\n"
    "Checkpoints (the full training state: a stopped run resumes exactly where it was):\n"
    "  --checkpoint-dir DIR    write checkpoints to DIR (created if missing)\n"
    "  --checkpoint-every N    every N optimizer steps; 0 = at each epoch end            [0]\n"
    "  --checkpoint-keep K     keep the newest K checkpoints                              [2]\n"
    "  --resume R              auto (newest valid in DIR, else scratch) | never | FILE [auto]\n"
    "\n"
    "Execution:\n"
    "  --device D              auto | cpu | cuda                                   [auto]\n"
    "  --no-cuda               same as --device cpu\n"
    "  --threads N             BLAS/OpenMP threads per rank    [SLURM_CPUS_PER_TASK or 1]\n"
    "  --precision P           fp32 | tf32 | bf16: the GPU's GEMMs                [fp32]\n"
    "                          (convolutions, linear layers). Storage stays fp32\n"
    "                          everywhere: tf32/bf16 round each GEMM's fp32 inputs to\n"
    "                          10/7 mantissa bits inside cuBLAS (tensor cores) and add\n"
    "                          the products in fp32: a GEMM's result is off by about\n"
    "                          1e-3/1e-2 of its largest value. All else (BatchNorm,\n"
    "                          softmax, sums, optimizer) is fp32 with double sums. bf16\n"
    "                          is not expected to beat tf32 (the same fp32 traffic).\n"
    "  --conv C                CPU convolutions: auto | im2col | onednn | winograd.\n"
    "                          onednn: oneDNN's direct convolutions; winograd: its\n"
    "                          Winograd F(4,3) for 3x3 kernels on AVX-512 CPUs,\n"
    "                          direct elsewhere; both leave one-channel inputs to\n"
    "                          im2col. auto: winograd where built with oneDNN, else\n"
    "                          im2col                                          [auto]\n"
    "  --cuda-graph on|off     replay each full-batch training step (accumulation 1)\n"
    "                          as one CUDA graph, captured after the first step   [on]\n"
    "  --bucket-mb F           gradient all-reduce bucket size in MiB                 [1]\n"
    "  --bootstrap-addr H:P    pin NCCL's bootstrap to HOST:PORT (firewalled clusters)\n"
    "  --comm-timeout S        seconds a rank waits on a collective before aborting, at\n"
    "                          start-up and in the first step                       [300]\n"
    "  --step-timeout S        the same after the first step (a frozen peer ends the\n"
    "                          job in S s; never above --comm-timeout)               [60]\n"
    "  --verbose               every rank reports, not only rank 0\n"
    "  --profile               at the end, a table of where the time went: forward and\n"
    "                          backward per layer, loss, optimizer, batch gather,\n"
    "                          all-reduce wait, evaluation, start-up, checkpoints (max\n"
    "                          and mean over ranks; also in the --metrics summary). On a\n"
    "                          GPU: device time from CUDA events on the compute stream,\n"
    "                          steps eager (turns --cuda-graph off)\n"
    "  --help, --version\n"
    "\n"
    "Exit status: 0 ok, 64 usage, 65 bad data, 66 missing input, 69 device unavailable,\n"
    "70 internal error, 73 cannot create output, 74 I/O error, 75 stopped by a signal with a\n"
    "checkpoint written (run the same command to resume), 78 broken launch/configuration.\n";

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die_all(EX_USAGE, "option %s: '%s' is not an integer in [%ld, %ld]", opt, s, lo, hi);
    return v;
}

static double parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        die_all(EX_USAGE, "option %s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
    return v;
}

static const char *parse_choice(const char *opt, const char *s, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(s, choices[i]) == 0)
            return choices[i];
    die_all(EX_USAGE, "option %s: '%s' is not one of the accepted values (see --help)", opt, s);
}

static const char *parse_nonempty(const char *opt, const char *s)
{
    if (!*s)
        die_all(EX_USAGE, "option %s: empty value", opt);
    return s;
}

enum {
    OPT_BATCH = 256, OPT_TEST_BATCH, OPT_EPOCHS, OPT_LR, OPT_GAMMA, OPT_SEED, OPT_LOG_INTERVAL,
    OPT_SAVE, OPT_LOAD, OPT_DRY_RUN, OPT_NO_CUDA, OPT_DATA, OPT_MODEL, OPT_OPTIMIZER, OPT_MOMENTUM,
    OPT_WD, OPT_ACCUM, OPT_MAX_STEPS, OPT_THREADS, OPT_METRICS, OPT_DEVICE, OPT_PRECISION, OPT_CONV,
    OPT_CUDA_GRAPH,
    OPT_BOOTSTRAP, OPT_COMM_TIMEOUT, OPT_STEP_TIMEOUT, OPT_BUCKET, OPT_VERBOSE, OPT_PROFILE, OPT_HELP, OPT_VERSION,
    OPT_CKPT_DIR,
    OPT_CKPT_EVERY, OPT_CKPT_KEEP, OPT_RESUME
};

static const struct option long_options[] = {
    {"batch-size", required_argument, 0, OPT_BATCH},
    {"test-batch-size", required_argument, 0, OPT_TEST_BATCH},
    {"epochs", required_argument, 0, OPT_EPOCHS},
    {"lr", required_argument, 0, OPT_LR},
    {"gamma", required_argument, 0, OPT_GAMMA},
    {"seed", required_argument, 0, OPT_SEED},
    {"log-interval", required_argument, 0, OPT_LOG_INTERVAL},
    {"save-model", required_argument, 0, OPT_SAVE},
    {"load-model", required_argument, 0, OPT_LOAD},
    {"dry-run", no_argument, 0, OPT_DRY_RUN},
    {"no-cuda", no_argument, 0, OPT_NO_CUDA},
    {"data", required_argument, 0, OPT_DATA},
    {"model", required_argument, 0, OPT_MODEL},
    {"optimizer", required_argument, 0, OPT_OPTIMIZER},
    {"momentum", required_argument, 0, OPT_MOMENTUM},
    {"weight-decay", required_argument, 0, OPT_WD},
    {"accum-steps", required_argument, 0, OPT_ACCUM},
    {"max-steps", required_argument, 0, OPT_MAX_STEPS},
    {"threads", required_argument, 0, OPT_THREADS},
    {"metrics", required_argument, 0, OPT_METRICS},
    {"device", required_argument, 0, OPT_DEVICE},
    {"precision", required_argument, 0, OPT_PRECISION},
    {"conv", required_argument, 0, OPT_CONV},
    {"cuda-graph", required_argument, 0, OPT_CUDA_GRAPH},
    {"bootstrap-addr", required_argument, 0, OPT_BOOTSTRAP},
    {"comm-timeout", required_argument, 0, OPT_COMM_TIMEOUT},
    {"step-timeout", required_argument, 0, OPT_STEP_TIMEOUT},
    {"bucket-mb", required_argument, 0, OPT_BUCKET},
    {"verbose", no_argument, 0, OPT_VERBOSE},
    {"profile", no_argument, 0, OPT_PROFILE},
    {"checkpoint-dir", required_argument, 0, OPT_CKPT_DIR},
    {"checkpoint-every", required_argument, 0, OPT_CKPT_EVERY},
    {"checkpoint-keep", required_argument, 0, OPT_CKPT_KEEP},
    {"resume", required_argument, 0, OPT_RESUME},
    {"help", no_argument, 0, OPT_HELP},
    {"version", no_argument, 0, OPT_VERSION},
    {0, 0, 0, 0},
};

/* --help and --version: rank 0 prints, every rank leaves cleanly. */
static _Noreturn void print_and_exit(const char *text)
{
    if (world_rank() == 0)
        fputs(text, stdout);
    exit_all(0);
}

/* The rule NCCL's bootstrap address follows (gpu_plan.c), checked here so a typo is a usage error at once. */
static const char *parse_hostport(const char *opt, const char *s)
{
    char host[256];
    int port;
    const char *err;
    if (gpu_plan_parse_hostport(s, host, sizeof host, &port, &err) != 0)
        die_all(EX_USAGE, "option %s: '%s': %s", opt, s, err);
    return s;
}

void options_parse(int argc, char **argv, options *o)
{
    static const char *const models[] = {"net", "convnet", NULL};
    static const char *const optimizers[] = {"adadelta", "sgd", NULL};
    static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
    static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};
    static const char *const convs[] = {"auto", "im2col", "onednn", "winograd", NULL};
    static const char *const on_off[] = {"off", "on", NULL};

    *o = (options){
        .test_batch_size = 1000, .epochs = 14, .lr = -1, .gamma = 0.7, .seed = 1, .log_interval = 10,
        .data_dir = "data/mnist", .model = "net", .accum_steps = 1, .device = DEVICE_AUTO,
        .precision = "fp32", .conv = "auto", .comm_timeout = 300, .step_timeout = 60, .bucket_mb = 1,
        .cuda_graph = 1, .checkpoint_keep = 2, .resume = "auto",
    };
    opterr = 0; /* our own one-line messages instead of getopt's */
    int c;
    while ((c = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (c) {
        case OPT_BATCH: o->batch_size = (int)parse_long("--batch-size", optarg, 1, 1 << 20); break;
        case OPT_TEST_BATCH: o->test_batch_size = (int)parse_long("--test-batch-size", optarg, 1, 1 << 20); break;
        case OPT_EPOCHS: o->epochs = (int)parse_long("--epochs", optarg, 0, 100000); break;
        case OPT_LR: o->lr = parse_double("--lr", optarg, 0, 1e6); break;
        case OPT_GAMMA: o->gamma = parse_double("--gamma", optarg, 0, 1e6); break;
        case OPT_SEED: o->seed = (uint64_t)parse_long("--seed", optarg, 0, 0x7fffffffffffffffL); break;
        case OPT_LOG_INTERVAL: o->log_interval = (int)parse_long("--log-interval", optarg, 1, 1 << 30); break;
        case OPT_SAVE: o->save_model = parse_nonempty("--save-model", optarg); break;
        case OPT_LOAD: o->load_model = parse_nonempty("--load-model", optarg); break;
        case OPT_DRY_RUN: o->dry_run = 1; break;
        case OPT_NO_CUDA: o->device = DEVICE_CPU; break;
        case OPT_DATA: o->data_dir = parse_nonempty("--data", optarg); break;
        case OPT_MODEL: o->model = parse_choice("--model", optarg, models); break;
        case OPT_OPTIMIZER: o->optimizer = parse_choice("--optimizer", optarg, optimizers); break;
        case OPT_MOMENTUM: o->momentum = parse_double("--momentum", optarg, 0, 1); break;
        case OPT_WD: o->weight_decay = parse_double("--weight-decay", optarg, 0, 1e3); break;
        case OPT_ACCUM: o->accum_steps = (int)parse_long("--accum-steps", optarg, 1, 1 << 20); break;
        case OPT_MAX_STEPS: o->max_steps = parse_long("--max-steps", optarg, 0, 1L << 40); break;
        case OPT_THREADS: o->threads = (int)parse_long("--threads", optarg, 1, 4096); break;
        case OPT_METRICS: o->metrics = parse_nonempty("--metrics", optarg); break;
        case OPT_DEVICE: {
            const char *d = parse_choice("--device", optarg, devices);
            o->device = d == devices[1] ? DEVICE_CPU : d == devices[2] ? DEVICE_CUDA : DEVICE_AUTO;
            break;
        }
        case OPT_PRECISION: o->precision = parse_choice("--precision", optarg, precisions); break;
        case OPT_CONV: o->conv = parse_choice("--conv", optarg, convs); break;
        case OPT_CUDA_GRAPH: o->cuda_graph = strcmp(parse_choice("--cuda-graph", optarg, on_off), "on") == 0; break;
        case OPT_BOOTSTRAP: o->bootstrap_addr = parse_hostport("--bootstrap-addr", optarg); break;
        case OPT_COMM_TIMEOUT: o->comm_timeout = parse_double("--comm-timeout", optarg, 0.1, 1e6); break;
        case OPT_STEP_TIMEOUT: o->step_timeout = parse_double("--step-timeout", optarg, 0.1, 1e6); break;
        case OPT_BUCKET: o->bucket_mb = parse_double("--bucket-mb", optarg, 0, 1e4); break;
        case OPT_VERBOSE: o->verbose = 1; break;
        case OPT_PROFILE: o->profile = 1; break;
        case OPT_CKPT_DIR: o->checkpoint_dir = parse_nonempty("--checkpoint-dir", optarg); break;
        case OPT_CKPT_EVERY: o->checkpoint_every = parse_long("--checkpoint-every", optarg, 0, 1L << 40); break;
        case OPT_CKPT_KEEP: o->checkpoint_keep = (int)parse_long("--checkpoint-keep", optarg, 1, 1 << 20); break;
        case OPT_RESUME: o->resume = parse_nonempty("--resume", optarg); break;
        case OPT_HELP: print_and_exit(usage_text);
        case OPT_VERSION: print_and_exit("mnist_ddp " PACKAGE_VERSION "\n");
        case ':': die_all(EX_USAGE, "option %s needs a value (see --help)", name);
        default: die_all(EX_USAGE, "unknown option '%s' (see --help)", name);
        }
    }
    if (optind < argc)
        die_all(EX_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->checkpoint_every && !o->checkpoint_dir)
        die_all(EX_USAGE, "option --checkpoint-every needs --checkpoint-dir DIR");
    if (o->dry_run)
        o->epochs = o->epochs ? 1 : 0;
}
