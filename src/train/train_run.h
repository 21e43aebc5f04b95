/* The trainer's state of one run, shared by train.c (setup, the loops) and train_report.c (progress lines,
 * the summary); not an interface beyond them. */
#ifndef MNIST_TRAIN_RUN_H
#define MNIST_TRAIN_RUN_H
#include <stdint.h>

#include "nn/backend.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "train/evaluate.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "train/options.h"
#include "train/step_graph.h"
#include "train/checkpoint.h"

/* The recipe of each model (PyTorch examples); options override it. */
typedef struct {
    int batch;
    optim_cfg opt;
    double lr;
    int lr_per_rank; /* lr is the model's default times the world size (convnet) */
} recipe;

/* The data set in the device's memory, and its identity. */
typedef struct {
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    uint64_t n_train, n_test, test_count; /* test_count: this rank's share of the test set */
    char train_sha[80];                   /* the training set's source checksum, its identity in checkpoints */
} run_data;

/* One step's inputs in the device's memory, at fixed places (a replayed step reads them). */
typedef struct {
    float *x;
    uint8_t *y;
    uint64_t *perm, *host_perm;
    uint64_t *ids; /* the micro-batch's sample ids */
} run_batch;

/* What decides when a run stops before its last epoch: signals and the Slurm job's end. */
typedef struct {
    long saved_step;                /* the step of the newest checkpoint */
    int signal;                     /* the signal that stopped the run (preempt.h), 0 if none */
    double signal_age, signal_seen; /* seconds from the signal to the step that saw it; when that was */
    double job_end;                 /* the Slurm job's end (epoch seconds), 0 if unknown or without checkpoints */
    double step_max_s, ckpt_s;      /* the longest step and the last checkpoint write, for the stop margin */
} run_stop;

/* Where the wall-clock time went (seconds): training (without checkpoint writes), reading the data,
 * evaluations with their replica checks, and checkpoint writes; the backend's counts in the training loops. */
typedef struct {
    double train_s, images;
    double startup_s, data_s, eval_s, ckpt_total_s;
    nn_counts step_counts; /* checkpoint writes in the training loops included */
    long counted_steps;    /* the steps they cover */
} run_times;

typedef struct {
    const options *o;
    const ddp_env *env;
    const nn_backend *be; /* the device: every array but the host_* ones is its memory */
    recipe rc;
    model *m;
    optim *opt;
    const comm_backend *cb; /* the collectives of the device: comm_mpi or comm_nccl() */
    void *comm;
    step_graph *graph;
    float *host_params; /* staging for replica checks and the fingerprint */
    long step;          /* optimizer steps so far */
    checkpoint_config ckpt;
    checkpoint_position start; /* where this run began: step 0 of epoch 1, or a checkpoint's position */
    run_data data;
    run_batch batch;
    run_stop stop;
    run_times times;
    long straggle_step; /* MNIST_DDP_STRAGGLER: the global step this rank sleeps before (0: none), and how long */
    double straggle_s;
} run;

/* One epoch's progress reports: the sums since the last line and over the epoch. */
typedef struct {
    uint64_t first, steps;   /* the epoch's first step in this run (after a resume), and its step count */
    double t0, t_log, ckpt0; /* the epoch's start, the last line's time, r->ckpt_total_s at the start */
    double images_log, loss_epoch, images_epoch;
} epoch_log;

/* The progress line after step s (0-based) of the epoch (collective). */
void report_progress(run *r, epoch_log *L, int epoch, uint64_t s, double lr);
/* The end of a run: replicas checked once more, the overlap and summary lines, the saved model. */
void run_summary(run *r, const eval_result *ev, int epochs, double total_s);
/* The --metrics file's first record of each process start (a resumed run adds one): what ran, where, from
 * which step, and the settings its trajectory depends on (the checkpoints' identity). */
void report_run(const run *r, uint64_t steps_per_epoch);
#endif
