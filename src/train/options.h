/* Command-line options of mnist_ddp; names mirror the PyTorch MNIST example where it has them. */
#ifndef MNIST_OPTIONS_H
#define MNIST_OPTIONS_H
#include <stdint.h>

#include "comm/comm_plan.h"
#include "nn/model.h"

typedef enum { DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA } device_choice;
typedef enum { GRAD_COMM_FP32, GRAD_COMM_BF16 } grad_comm_kind;
extern const char *const grad_comm_names[]; /* --grad-comm's words, in grad_comm_kind's order */

/* Variants for measurement: environment variables, each read and checked once by options_parse
 * (docs/gpu.md#variants-for-measurement). The GPU kernels' variants are indices into their value lists, 0 the
 * default; text is the variable's value, NULL where unset. */
typedef struct {
    const char *text;
    int rank;
    long step;
    double seconds;
} straggler_variant;
typedef struct {
    const char *text;
    comm_proxy_spec spec;
} proxy_variant;
enum { CONV1_IM2COL, CONV1_DIRECT };
enum { HEAD_COMPOSED, HEAD_FUSED };
enum { POOL_FUSED, POOL_COMPOSED };
enum { CONV2_IM2COL, CONV2_DIRECT, CONV2_3XTF32 };
enum { BACKWARD_SERIAL, BACKWARD_FORKED };
enum { FC_GEMM, FC_EPILOGUE };

typedef struct {
    int batch_size; /* per rank; 0 = the model's recipe default */
    int test_batch_size;
    int epochs; /* 0: evaluate only (with --load-model) */
    double lr;  /* < 0: the recipe default */
    double gamma;
    uint64_t seed;
    int log_interval;
    const char *save_model;
    const char *load_model;
    int dry_run;
    const char *data_dir;
    model_kind model;
    int optimizer; /* an optim_kind; -1: the model's recipe default */
    double momentum, weight_decay;
    int accum_steps;
    long max_steps; /* 0: no limit */
    int threads;    /* 0: SLURM_CPUS_PER_TASK, else 1 */
    const char *metrics;
    device_choice device;
    const char *precision;
    const char *conv; /* CPU convolutions: "auto", "im2col", "onednn", "winograd" */
    int gemm;         /* CPU products: 0 auto (own AVX-512 kernels where the CPU has it), 1 blas */
    int cuda_graph;   /* 1: replay full-batch steps as a CUDA graph (--cuda-graph on) */
    const char *bootstrap_addr;
    double comm_timeout; /* start-up bound of collective waits */
    double step_timeout; /* bound of gradient all-reduce waits after the first step */
    double bucket_mb;
    long comm_progress_us;    /* the MPI all-reduce's progress thread's interval (0: none) */
    grad_comm_kind grad_comm; /* the gradient exchange's wire format */
    int grad_shm;             /* 1: one node sums gradients in shared memory (--grad-shm on) */
    int verbose;
    int profile;                /* --profile: the per-phase time table at the end (CPU only) */
    const char *checkpoint_dir; /* NULL: no training-state checkpoints */
    long checkpoint_every;      /* optimizer steps; 0: at each epoch end */
    int checkpoint_keep;
    const char *resume;                         /* "auto", "never" or a checkpoint file */
    int conv1, head, pool, conv2, backward, fc; /* the GPU kernels' variants (CONV1_IM2COL, ...) */
    int arm_alone;                              /* 1: one rank exchanges gradients as if it had peers */
    straggler_variant straggler;                /* a rank held back before a step (tests, demonstrations) */
    proxy_variant proxy;                        /* other GPUs' traffic stood in for (one GPU armed alone) */
} options;

/* Before MPI_Init: 1 where --help, 2 where --version comes before the first argument that is not an option,
 * else 0; options_print_info prints it where PRINT (one process of a job) and returns main's 0. Neither starts
 * MPI: at once, and on a login node whose MPI cannot start. */
int options_info(int argc, char **argv);
int options_print_info(int which, int print);
/* Parses argv; on --help/--version prints to stdout and exits 0; on a bad value exits 64 naming the
 * option (every rank parses the same argv, so every rank stops the same way). */
void options_parse(int argc, char **argv, options *o);
/* The variants' rules that need the device and world: the GPU kernels' variants and the traffic proxy are the
 * GPU path's (the proxy with one rank armed alone); else every rank stops with 78. */
void options_check_variants(const options *o, int gpu, int world);
/* Before MPI_Init, whose CUDA-aware kind may create a GPU context: --device or --no-cuda as options_parse
 * reads them, from the same table; a bad value reads as auto here and stops the run in options_parse. */
device_choice options_device(int argc, char **argv);
/* Before MPI_Init: whether --checkpoint-dir is given, so that a preemption signal during start-up is caught
 * (and the run stops with 75 at its first step) instead of ending the process. */
int options_checkpoints(int argc, char **argv);
/* --comm-timeout as given (its default where absent or malformed): the deadline of MPI's start-up. */
double options_comm_timeout(int argc, char **argv);
#endif
