#include "config.h"

#include "train/options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "gpu/gpu_plan.h"
#include "nn/model.h"

/* How an option's value is read and where it goes. */
typedef enum {
    ARG_FLAG,      /* no value: the int field becomes lo */
    ARG_INT,       /* int in [lo, hi] */
    ARG_LONG,      /* long in [lo, hi] */
    ARG_SEED,      /* uint64_t in [lo, hi] */
    ARG_DOUBLE,    /* double in [lo, hi] */
    ARG_STRING,    /* a non-empty string */
    ARG_CHOICE,    /* one of choices: the field points at it */
    ARG_INDEX,     /* one of choices: the int field gets its index (-1 without a default: none chosen) */
    ARG_HOSTPORT,  /* HOST:PORT (gpu_plan.c's rule) */
    ARG_STRAGGLER, /* RANK:STEP:SECONDS into a straggler_variant */
    ARG_PROXY,     /* GBPS[:RANKS] into a proxy_variant */
} arg_kind;

/* One option: everything the parser, --help (and so the man page) and the defaults know of it. */
typedef struct {
    const char *section; /* a heading printed before it in --help, or NULL */
    const char *name, *arg;
    arg_kind kind;
    size_t field; /* offsetof(options, ...) */
    double lo, hi;
    const char *const *choices;
    const char *def;   /* the default, read like a value (without the range check), or NULL: zero */
    const char *shown; /* the default as --help shows it; NULL: def; "": none; per_model: the model table's */
    const char *help;  /* lines after the first start with '\n' */
} option_spec;

static const char *const devices[] = {"auto", "cpu", "cuda", NULL}; /* device_choice's order */
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};
static const char *const convs[] = {"auto", "im2col", "onednn", "winograd", "wino43", NULL};
static const char *const off_on[] = {"off", "on", NULL};
const char *const grad_comm_names[] = {"fp32", "bf16", NULL};
static const char *const gemm_names[] = {"auto", "blas", NULL};
/* The variants' values, in the order of options.h's enums: the first is the default. */
static const char *const conv1_names[] = {"im2col", "direct", NULL};
static const char *const head_names[] = {"composed", "fused", NULL};
static const char *const pool_names[] = {"fused", "composed", NULL};
static const char *const conv2_names[] = {"im2col", "direct", "3xtf32", NULL};
static const char *const backward_names[] = {"serial", "forked", NULL};
static const char *const fc_names[] = {"gemm", "epilogue", NULL};
static const char *const zero_one[] = {"0", "1", NULL};

static int parse_straggler(const char *v, void *field, char *why, size_t len)
{
    straggler_variant *s = field;
    int n = 0;
    if (sscanf(v, "%d:%ld:%lf%n", &s->rank, &s->step, &s->seconds, &n) != 3 || v[n] || s->rank < 0 || s->step < 1 ||
        !(s->seconds > 0 && s->seconds <= 3600)) {
        snprintf(why, len, "RANK:STEP:SECONDS expected (a rank from 0, a global step from 1, 0 < SECONDS <= 3600)");
        return -1;
    }
    s->text = v;
    return 0;
}

static int parse_proxy(const char *v, void *field, char *why, size_t len)
{
    proxy_variant *p = field;
    if (comm_proxy_parse(v, &p->spec, why, len) != 0)
        return -1;
    p->text = v;
    return 0;
}

/* A structured value into its field: 0, or -1 with why. */
static int parse_structured(arg_kind kind, const char *v, void *field, char *why, size_t len)
{
    return kind == ARG_STRAGGLER ? parse_straggler(v, field, why, len) : parse_proxy(v, field, why, len);
}

static const char per_model[] = "per model"; /* a shown default that model_recipe_of gives, model by model */

#define F(member) offsetof(options, member)
static const option_spec specs[] = {
    {"Recipe (defaults follow the PyTorch MNIST example; per-model defaults in brackets):", "model", "NAME", ARG_INDEX,
     F(model), 0, 0, model_kind_names, "net", NULL, "net | convnet"},
    {NULL, "batch-size", "N", ARG_INT, F(batch_size), 1, 1 << 20, NULL, NULL, per_model,
     "training samples per rank per step"},
    {NULL, "test-batch-size", "N", ARG_INT, F(test_batch_size), 1, 1 << 20, NULL, "1000", NULL,
     "samples per evaluation read"},
    {NULL, "epochs", "N", ARG_INT, F(epochs), 0, 100000, NULL, "14", NULL,
     "passes over the training set; 0 = evaluate only"},
    {NULL, "lr", "F", ARG_DOUBLE, F(lr), 0, 1e6, NULL, "-1", per_model, "learning rate"},
    {NULL, "gamma", "F", ARG_DOUBLE, F(gamma), 0, 1e6, NULL, "0.7", NULL,
     "StepLR decay of the learning rate per epoch"},
    {NULL, "optimizer", "NAME", ARG_INDEX, F(optimizer), 0, 0, optim_kind_names, NULL, per_model, "adadelta | sgd"},
    {NULL, "momentum", "F", ARG_DOUBLE, F(momentum), 0, 1, NULL, NULL, "0", "SGD momentum"},
    {NULL, "weight-decay", "F", ARG_DOUBLE, F(weight_decay), 0, 1e3, NULL, NULL, "0",
     "L2 penalty added to the gradient"},
    {NULL, "accum-steps", "N", ARG_INT, F(accum_steps), 1, 1 << 20, NULL, "1", NULL,
     "micro-batches per optimizer step (one all-reduce)"},
    {NULL, "seed", "N", ARG_SEED, F(seed), 0, (double)LONG_MAX, NULL, "1", NULL, "seed of init, shuffle and dropout"},
    {NULL, "max-steps", "N", ARG_LONG, F(max_steps), 0, 1L << 40, NULL, NULL, "0",
     "stop after N optimizer steps in total (0 = no limit)"},
    {NULL, "dry-run", NULL, ARG_FLAG, F(dry_run), 1, 0, NULL, NULL, "",
     "one step, one epoch: a quick check of the setup"},
    {"Data and files:", "data", "DIR", ARG_STRING, F(data_dir), 0, 0, NULL, "data/mnist", NULL,
     "directory of HDF5 shards from 'make data'"},
    {NULL, "save-model", "PATH", ARG_STRING, F(save_model), 0, 0, NULL, NULL, "",
     "write the final model (HDF5, state_dict names)"},
    {NULL, "load-model", "PATH", ARG_STRING, F(load_model), 0, 0, NULL, NULL, "",
     "start from a model written by --save-model"},
    {NULL, "metrics", "FILE", ARG_STRING, F(metrics), 0, 0, NULL, NULL, "",
     "JSON lines: the run (settings, start), one per logged step and\nepoch, and a summary"},
    {NULL, "log-interval", "N", ARG_INT, F(log_interval), 1, 1 << 30, NULL, "10", NULL, "steps between progress lines"},
    {"Checkpoints (the full training state: a stopped run resumes exactly where it was):", "checkpoint-dir", "DIR",
     ARG_STRING, F(checkpoint_dir), 0, 0, NULL, NULL, "",
     "write checkpoints to DIR (created if missing; one run\nat a time: a second one stops with 73)"},
    {NULL, "checkpoint-every", "N", ARG_LONG, F(checkpoint_every), 0, 1L << 40, NULL, NULL, "0",
     "every N optimizer steps; 0 = at each epoch end"},
    {NULL, "checkpoint-keep", "K", ARG_INT, F(checkpoint_keep), 1, 1 << 20, NULL, "2", NULL,
     "keep the newest K checkpoints"},
    {NULL, "resume", "R", ARG_STRING, F(resume), 0, 0, NULL, "auto", NULL,
     "auto (newest valid in DIR, else scratch) | never (DIR's\ncheckpoints moved aside, scratch) | FILE"},
    {"Execution:", "device", "D", ARG_INDEX, F(device), 0, 0, devices, "auto", NULL, "auto | cpu | cuda"},
    {NULL, "no-cuda", NULL, ARG_FLAG, F(device), DEVICE_CPU, 0, NULL, NULL, "", "same as --device cpu"},
    {NULL, "threads", "N", ARG_INT, F(threads), 1, 4096, NULL, NULL, "SLURM_CPUS_PER_TASK or 1",
     "BLAS/OpenMP threads per rank"},
    {NULL, "precision", "P", ARG_CHOICE, F(precision), 0, 0, precisions, "fp32", NULL,
     "fp32 | tf32 | bf16: the GPU's GEMMs"
     "\n(convolutions, linear layers). Storage stays fp32"
     "\neverywhere: tf32/bf16 round each GEMM's fp32 inputs to"
     "\n10/7 mantissa bits inside cuBLAS (tensor cores) and add"
     "\nthe products in fp32: a GEMM's result is off by about"
     "\n1e-3/1e-2 of its largest value. All else (BatchNorm,"
     "\nsoftmax, sums, optimizer) is fp32 with double sums. bf16"
     "\nis not expected to beat tf32 (the same fp32 traffic)."},
    {NULL, "conv", "C", ARG_CHOICE, F(conv), 0, 0, convs, "auto", NULL,
     "CPU convolutions: auto | im2col | onednn | winograd |"
     "\nwino43. onednn: oneDNN's direct convolutions;"
     "\nwinograd: its Winograd F(4,3) for 3x3 kernels on"
     "\nAVX-512 CPUs, direct elsewhere; onednn and winograd"
     "\nleave one-channel inputs to im2col. wino43: winograd"
     "\nwith mnist_ddp's own Winograd for conv2 (forward and"
     "\nboth gradients) and direct conv1 where they fit; built"
     "\nwithout oneDNN: net's convolutions by the own kernels,"
     "\nthe rest im2col. auto: wino43 where built with oneDNN"
     "\nor where the CPU has AVX2 or AVX-512, else im2col"},
    {NULL, "gemm", "G", ARG_INDEX, F(gemm), 0, 0, gemm_names, "auto", NULL,
     "CPU matrix products (fc1's, im2col's): auto | blas."
     "\nauto: mnist_ddp's own AVX-512 kernels on CPUs with"
     "\nAVX-512, BLAS elsewhere; blas: BLAS always"},
    {NULL, "cuda-graph", "on|off", ARG_INDEX, F(cuda_graph), 0, 0, off_on, "on", NULL,
     "replay each full-batch training step (accumulation 1)"
     "\nas one CUDA graph, captured after the first step"},
    {NULL, "bucket-mb", "F", ARG_DOUBLE, F(bucket_mb), 0, 1e4, NULL, "1", NULL,
     "gradient all-reduce bucket size in MiB"},
    {NULL, "comm-progress", "US", ARG_LONG, F(comm_progress_us), 0, 1000000, NULL, "500", NULL,
     "MPI (CPU) all-reduce across nodes: a thread tests the"
     "\nbuckets in flight every US microseconds during backward,"
     "\nso they move while a layer computes; 0: no thread, MPI"
     "\nmoves them at layer boundaries only. Not on one node"},
    {NULL, "grad-comm", "W", ARG_INDEX, F(grad_comm), 0, 0, grad_comm_names, "fp32", NULL,
     "fp32 | bf16: the gradient exchange's format. bf16 sends"
     "\nhalf the bytes: each rank's gradients rounded to bfloat16,"
     "\neach addition in the all-reduce done in fp32 and rounded"
     "\nto bf16, the result applied in fp32 (as PyTorch DDP's"
     "\nbf16 compression hook)"},
    {NULL, "grad-shm", "on|off", ARG_INDEX, F(grad_shm), 0, 0, off_on, "on", NULL,
     "CPU ranks all on one node, fp32: the ranks sum each"
     "\nother's gradients in shared memory (/dev/shm), with no"
     "\nMPI messages; off: MPI's all-reduce"},
    {NULL, "bootstrap-addr", "H:P", ARG_HOSTPORT, F(bootstrap_addr), 0, 0, NULL, NULL, "",
     "pin NCCL's bootstrap to HOST:PORT (firewalled clusters)"},
    {NULL, "comm-timeout", "S", ARG_DOUBLE, F(comm_timeout), 0.1, 1e6, NULL, "300", NULL,
     "seconds a rank waits on a collective before aborting, at"
     "\nstart-up and in the first step"},
    {NULL, "step-timeout", "S", ARG_DOUBLE, F(step_timeout), 0.1, 1e6, NULL, "60", NULL,
     "the same after the first step (a frozen peer ends the"
     "\njob in S s; never above --comm-timeout)"},
    {NULL, "verbose", NULL, ARG_FLAG, F(verbose), 1, 0, NULL, NULL, "", "every rank reports, not only rank 0"},
    {NULL, "profile", NULL, ARG_FLAG, F(profile), 1, 0, NULL, NULL, "",
     "at the end, a table of where the time went: forward and"
     "\nbackward per layer, loss, optimizer, batch gather,"
     "\nall-reduce wait, evaluation, start-up, checkpoints (max"
     "\nand mean over ranks; also in the --metrics summary). On a"
     "\nGPU: device time per phase, from stamp kernels inside"
     "\nthe replayed step (each one node more); with --cuda-graph"
     "\noff from CUDA events"},
};

/* Environment variables rather than options, so that a benchmark switches them without changing the command
 * it measures. --help shows the name alone; lo 1: a value but the default is the GPU path's only. */
static const option_spec variants[] = {
    {"Variants for measurement (environment variables; a bad value stops the run with 78):", "MNIST_DDP_CONV1", NULL,
     ARG_INDEX, F(conv1), 1, 0, conv1_names, "im2col", NULL,
     "im2col | direct: the GPU's conv1 forward as one kernel and"
     "\nits gradients as one reduction (direct)"},
    {NULL, "MNIST_DDP_HEAD", NULL, ARG_INDEX, F(head), 1, 0, head_names, "composed", NULL,
     "composed | fused: net's training head as one GPU kernel"},
    {NULL, "MNIST_DDP_POOL", NULL, ARG_INDEX, F(pool), 1, 0, pool_names, "fused", NULL,
     "fused | composed: conv2's pool with dropout1 as one GPU"
     "\nkernel each way (fused), or the kernels it fuses"},
    {NULL, "MNIST_DDP_CONV2", NULL, ARG_INDEX, F(conv2), 1, 0, conv2_names, "im2col", NULL,
     "im2col | direct | 3xtf32: the GPU's conv2 with its pool"
     "\nwithout a column buffer (direct; 3xtf32: on tensor cores"
     "\nin any precision)"},
    {NULL, "MNIST_DDP_BACKWARD", NULL, ARG_INDEX, F(backward), 1, 0, backward_names, "serial", NULL,
     "serial | forked: the GPU's fc layers compute their weight"
     "\ngradient on a second stream beside their input gradient"},
    {NULL, "MNIST_DDP_FC", NULL, ARG_INDEX, F(fc), 1, 0, fc_names, "gemm", NULL,
     "gemm | epilogue: the GPU's fc forward as a GEMM with bias"
     "\nand ReLU kernels, or one cuBLASLt matmul doing both"},
    {NULL, "MNIST_DDP_ARM_ALONE", NULL, ARG_INDEX, F(arm_alone), 0, 0, zero_one, "0", NULL,
     "0 | 1: one rank exchanges its gradients as with peers"},
    {NULL, "MNIST_DDP_STRAGGLER", NULL, ARG_STRAGGLER, F(straggler), 0, 0, NULL, NULL, "",
     "RANK:STEP:SECONDS: rank RANK sleeps SECONDS before global"
     "\nstep STEP, outside every collective"},
    {NULL, "MNIST_DDP_COMM_PROXY", NULL, ARG_PROXY, F(proxy), 0, 0, NULL, NULL, "",
     "GBPS[:RANKS]: one GPU armed alone also moves what a ring"
     "\nall-reduce over RANKS GPUs (8) moves, at GBPS GB/s"},
};
#undef F
enum { NSPECS = sizeof specs / sizeof *specs, OPT_HELP = NSPECS, OPT_VERSION };
enum { NVARIANTS = sizeof variants / sizeof *variants };

static const char usage_head[] =
    "Usage: mnist_ddp [OPTION]...\n"
    "Data-parallel MNIST training: one MPI rank per CPU socket share or GPU; gradients averaged\n"
    "with MPI (CPU) or NCCL (GPU). Launch with mpirun -np N, srun --mpi=pmix, or alone.\n";
static const char usage_tail[] =
    "  --help, --version\n"
    "\n"
    "Signals: with --checkpoint-dir, USR1, TERM or INT write a checkpoint and stop with 75.\n"
    "USR2 (scancel -s USR2 JOB, or kill): every rank prints one status line (step, what it\n"
    "does or waits in, for how long) and training goes on. A missed deadline ends the job\n"
    "with 69, naming the ranks that did not answer and where the others waited.\n"
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

static const char *parse_choice_quiet(const char *s, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(s, choices[i]) == 0)
            return choices[i];
    return NULL;
}

static const char *parse_choice(const char *opt, const char *s, const char *const *choices)
{
    const char *c = parse_choice_quiet(s, choices);
    if (!c)
        die_all(EX_USAGE, "option %s: '%s' is not one of the accepted values (see --help)", opt, s);
    return c;
}

static const char *parse_nonempty(const char *opt, const char *s)
{
    if (!*s)
        die_all(EX_USAGE, "option %s: empty value", opt);
    return s;
}

/* The per-model default of --batch-size, --lr or --optimizer, model by model: "64 | 100". */
static void shown_per_model(const char *name, char *buf, size_t len)
{
    size_t at = 0;
    for (int k = 0; k < MODEL_KINDS && at < len; k++) {
        const model_recipe *r = model_recipe_of((model_kind)k);
        const char *sep = k ? " | " : "";
        if (strcmp(name, "batch-size") == 0)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", sep, r->batch);
        else if (strcmp(name, "lr") == 0)
            at += (size_t)snprintf(buf + at, len - at, "%s%g%s", sep, r->lr, r->lr_times_world ? " x world size" : "");
        else
            at += (size_t)snprintf(buf + at, len - at, "%s%s", sep, optim_kind_names[r->optimizer]);
    }
}

/* One entry of --help: "  --name ARG" (or a variant's name) in 24 columns, the help, and the default in
 * brackets ending at column 88 on its first line. */
static void print_spec(const option_spec *s, const char *dashes)
{
    char left[64], shown[64] = "";
    if (s->section)
        printf("\n%s\n", s->section);
    snprintf(left, sizeof left, "%s%s%s%s", dashes, s->name, s->arg ? " " : "", s->arg ? s->arg : "");
    char model_defaults[48];
    const char *d = s->shown ? s->shown : s->def;
    if (d == per_model)
        shown_per_model(s->name, model_defaults, sizeof model_defaults), d = model_defaults;
    if (d && *d)
        snprintf(shown, sizeof shown, "[%s]", d);
    const char *h = s->help, *nl = strchr(h, '\n');
    int n = nl ? (int)(nl - h) : (int)strlen(h), at = printf("  %-24s%.*s", left, n, h);
    int pad = 88 - at - (int)strlen(shown);
    printf("%*s%s\n", *shown ? (pad > 1 ? pad : 1) : 0, "", shown);
    for (h = nl; h; h = nl) {
        nl = strchr(++h, '\n');
        printf("  %-24s%.*s\n", "", nl ? (int)(nl - h) : (int)strlen(h), h);
    }
}

static void print_usage(void)
{
    fputs(usage_head, stdout);
    for (int i = 0; i < NSPECS; i++)
        print_spec(&specs[i], "--");
    for (int i = 0; i < NVARIANTS; i++)
        print_spec(&variants[i], "");
    fputs(usage_tail, stdout);
}

static void print_info(int help)
{
    if (help)
        print_usage();
    else
        fputs("mnist_ddp " PACKAGE_VERSION "\n", stdout);
}

/* --help and --version after an argument that is not an option (options_info stops there): rank 0 prints,
 * every rank leaves cleanly. */
static _Noreturn void print_and_exit(int help)
{
    if (world_rank() == 0)
        print_info(help);
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

static int choice_index(const char *opt, const char *s, const char *const *choices)
{
    const char *c = parse_choice(opt, s, choices);
    int i = 0;
    while (choices[i] != c)
        i++;
    return i;
}

/* One value into its field; checked: against the range (a user's value), else as the table's default. */
static void set_value(options *o, const option_spec *s, const char *v, int checked)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", s->name);
    double lo = checked ? s->lo : -INFINITY, hi = checked ? s->hi : INFINITY;
    long llo = checked ? (long)s->lo : LONG_MIN, lhi = checked && s->hi < (double)LONG_MAX ? (long)s->hi : LONG_MAX;
    void *f = (char *)o + s->field;
    switch (s->kind) {
    case ARG_FLAG:
        *(int *)f = (int)s->lo;
        break;
    case ARG_INT:
        *(int *)f = (int)parse_long(opt, v, llo, lhi);
        break;
    case ARG_LONG:
        *(long *)f = parse_long(opt, v, llo, lhi);
        break;
    case ARG_SEED:
        *(uint64_t *)f = (uint64_t)parse_long(opt, v, llo, lhi);
        break;
    case ARG_DOUBLE:
        *(double *)f = parse_double(opt, v, lo, hi);
        break;
    case ARG_STRING:
        *(const char **)f = parse_nonempty(opt, v);
        break;
    case ARG_CHOICE:
        *(const char **)f = parse_choice(opt, v, s->choices);
        break;
    case ARG_INDEX:
        *(int *)f = choice_index(opt, v, s->choices);
        break;
    case ARG_HOSTPORT:
        *(const char **)f = parse_hostport(opt, v);
        break;
    case ARG_STRAGGLER:
    case ARG_PROXY: {
        char why[128];
        if (parse_structured(s->kind, v, f, why, sizeof why) != 0)
            die_all(EX_USAGE, "option %s: '%s': %s", opt, v, why);
        break;
    }
    }
}

/* A variant's value as a choice's list: "im2col (the default), direct or 3xtf32". */
static void choices_text(const char *const *choices, char *buf, size_t len)
{
    snprintf(buf, len, "%s (the default)", choices[0]);
    for (int i = 1; choices[i]; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", choices[i + 1] ? ", " : " or ", choices[i]);
}

/* The variants from the environment, each checked here once (78 where malformed); unset, or an empty choice,
 * leaves the default. */
static void read_variants(options *o)
{
    for (int i = 0; i < NVARIANTS; i++) {
        const option_spec *s = &variants[i];
        const char *v = getenv(s->name);
        void *f = (char *)o + s->field;
        char why[128];
        if (!v || (s->kind == ARG_INDEX && !*v))
            continue;
        if (s->kind == ARG_INDEX) {
            const char *c = parse_choice_quiet(v, s->choices);
            if (!c) {
                choices_text(s->choices, why, sizeof why);
                die_all(EX_CONFIG, "%s=%s: %s", s->name, v, why);
            }
            *(int *)f = choice_index(s->name, c, s->choices);
        } else if (parse_structured(s->kind, v, f, why, sizeof why) != 0) {
            die_all(EX_CONFIG, "environment variable %s='%s': %s", s->name, v, why);
        }
    }
}

void options_check_variants(const options *o, int gpu, int world)
{
    for (int i = 0; i < NVARIANTS; i++) {
        const option_spec *s = &variants[i];
        int at = s->kind == ARG_INDEX ? *(const int *)((const char *)o + s->field) : 0;
        if (!gpu && s->lo == 1 && at != 0)
            die_all(EX_CONFIG, "%s=%s: the GPU path only", s->name, s->choices[at]);
    }
    if (o->proxy.text && (!gpu || world != 1 || !o->arm_alone))
        die_all(EX_CONFIG,
                "environment variable MNIST_DDP_COMM_PROXY='%s' stands in for other GPUs' traffic: it needs the GPU "
                "path, one rank and MNIST_DDP_ARM_ALONE=1",
                o->proxy.text);
}

/* getopt_long's table from ours: each option's index is its value. */
static void long_options(struct option longs[NSPECS + 3])
{
    for (int i = 0; i < NSPECS; i++)
        longs[i] = (struct option){specs[i].name, specs[i].arg ? required_argument : no_argument, 0, i};
    longs[NSPECS] = (struct option){"help", no_argument, 0, OPT_HELP};
    longs[NSPECS + 1] = (struct option){"version", no_argument, 0, OPT_VERSION};
    longs[NSPECS + 2] = (struct option){0};
}

/* What the quiet scan before MPI_Init finds, up to the first argument that is not an option. */
typedef struct {
    device_choice device; /* as options_parse reads it (a bad value reads as auto) */
    int info;             /* 1 or 2 where --help or --version comes first, else 0 */
    int checkpoints;      /* --checkpoint-dir is given */
    double comm_timeout;  /* --comm-timeout where valid, else its default */
} early_scan;

/* s as a number in [lo, hi], else fallback (the full parse says what is wrong). */
static double quiet_double(const char *s, double lo, double hi, double fallback)
{
    char *end;
    double v = s ? strtod(s, &end) : 0;
    return s && *s && !*end && v >= lo && v <= hi ? v : fallback;
}

static early_scan scan_early(int argc, char **argv)
{
    struct option longs[NSPECS + 3];
    long_options(longs);
    options o = {0};
    early_scan e = {.comm_timeout = 300};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:", longs, NULL)) != -1) {
        const option_spec *s = &specs[c >= 0 && c < NSPECS ? c : 0];
        if ((c == OPT_HELP || c == OPT_VERSION) && !e.info)
            e.info = c == OPT_HELP ? 1 : 2;
        else if (c >= 0 && c < NSPECS && s->field == offsetof(options, device) &&
                 (s->kind == ARG_FLAG || parse_choice_quiet(optarg, s->choices)))
            set_value(&o, s, optarg, 1);
        else if (c >= 0 && c < NSPECS && s->field == offsetof(options, checkpoint_dir))
            e.checkpoints = 1;
        else if (c >= 0 && c < NSPECS && s->field == offsetof(options, comm_timeout))
            e.comm_timeout = quiet_double(optarg, s->lo, s->hi, e.comm_timeout);
    }
    optind = 0; /* the full parse starts afresh */
    e.device = o.device;
    return e;
}

device_choice options_device(int argc, char **argv) { return scan_early(argc, argv).device; }
int options_info(int argc, char **argv) { return scan_early(argc, argv).info; }
int options_checkpoints(int argc, char **argv) { return scan_early(argc, argv).checkpoints; }
double options_comm_timeout(int argc, char **argv) { return scan_early(argc, argv).comm_timeout; }

int options_print_info(int which, int print)
{
    if (print)
        print_info(which == 1);
    fflush(stdout);
    return 0;
}

void options_parse(int argc, char **argv, options *o)
{
    struct option longs[NSPECS + 3];
    long_options(longs);
    *o = (options){0};
    for (int i = 0; i < NSPECS; i++)
        if (specs[i].def)
            set_value(o, &specs[i], specs[i].def, 0);
        else if (specs[i].kind == ARG_INDEX)
            *(int *)((char *)o + specs[i].field) = -1;
    opterr = 0; /* our own one-line messages instead of getopt's */
    int c;
    while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        const char *name = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        if (c >= 0 && c < NSPECS)
            set_value(o, &specs[c], optarg, 1);
        else if (c == OPT_HELP || c == OPT_VERSION)
            print_and_exit(c == OPT_HELP);
        else if (c == ':')
            die_all(EX_USAGE, "option %s needs a value (see --help)", name);
        else
            die_all(EX_USAGE, "unknown option '%s' (see --help)", name);
    }
    if (optind < argc)
        die_all(EX_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->checkpoint_every && !o->checkpoint_dir)
        die_all(EX_USAGE, "option --checkpoint-every needs --checkpoint-dir DIR");
    if (o->dry_run)
        o->epochs = o->epochs ? 1 : 0;
    read_variants(o);
}
