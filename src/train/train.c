#include "train/train.h"
#include "train/train_run.h"
#include "train/replicas.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/model_file.h"
#include "base/clock.h"
#include "comm/comm.h"
#include "gpu/gpu.h"
#include "nn/cpu/conv_onednn.h"
#include "base/errors.h"
#include "train/evaluate.h"
#include "base/log.h"
#include "data/mnist.h"
#include "nn/model.h"
#include "nn/cpu/conv_choice.h"
#include "nn/cpu/wino43.h"
#include "nn/cpu/gemm.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/optim.h"
#include "comm/preempt.h"
#include "comm/stall.h"
#include "base/profile.h"
#include "base/rng.h"
#include "data/sampler.h"
#include "data/shards.h"
#include "train/step_graph.h"
#include "train/checkpoint.h"

/* Domain separation of the seed: shuffles and dropout masks draw from unrelated streams. */
#define DROPOUT_SALT  0x64726f706f757421ULL
/* Seconds kept free before a Slurm job's end beyond the measured step and checkpoint times. */
#define STOP_SAFETY_S 30.0

static recipe resolve_recipe(const options *o, int world)
{
    const model_recipe *d = model_recipe_of(o->model);
    recipe r = {.batch = o->batch_size ? o->batch_size : d->batch};
    r.opt = (optim_cfg){.kind = o->optimizer >= 0 ? (optim_kind)o->optimizer : d->optimizer,
                        .rho = 0.9f,
                        .eps = 1e-6f,
                        .momentum = (float)o->momentum,
                        .weight_decay = (float)o->weight_decay};
    r.lr_per_rank = o->lr < 0 && d->lr_times_world;
    r.lr = o->lr >= 0 ? o->lr : r.lr_per_rank ? d->lr * world : d->lr;
    return r;
}

/* Samples first .. first+count-1 of a shard set in the backend's memory: all of MNIST is 55 MB, read once, so
 * no step copies images from the host. Read straight into it where it is host memory, else through
 * stage_images and stage_labels (at least count samples). */
static void read_to_backend(const nn_backend *be, shard_set *s, uint64_t first, uint64_t count, uint8_t *stage_images,
                            uint8_t *stage_labels, uint8_t **images, uint8_t **labels)
{
    *images = be->alloc(count ? count * MNIST_PIXELS : 1);
    *labels = be->alloc(count ? count : 1);
    if (be->host_memory) {
        shards_read_range(s, first, count, *images, *labels);
        return;
    }
    shards_read_range(s, first, count, stage_images, stage_labels);
    be->upload(*images, stage_images, count * MNIST_PIXELS);
    be->upload(*labels, stage_labels, count);
}

static void load_data(run *r)
{
    double t0 = clock_now();
    const char *dir = r->o->data_dir;
    struct stat st;
    if (stat(dir, &st) != 0)
        die_all(EX_NOINPUT, "--data %s: %s; prepare MNIST with 'make data' (or pass --data DIR)", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        die_all(EX_NOINPUT, "--data %s: not a directory (a directory of shards, as 'make data' writes)", dir);
    shard_set *train = shards_open(dir, "train");
    shard_set *test = shards_open(dir, "test");
    r->data.n_train = shards_total(train);
    r->data.n_test = shards_total(test);
    snprintf(r->data.train_sha, sizeof r->data.train_sha, "%s", shards_source_sha256(train));
    uint64_t need = (uint64_t)r->env->world * (uint64_t)r->rc.batch;
    if (r->data.n_train < need)
        die_all(EX_USAGE,
                "--batch-size %d: %d ranks x %d = %llu samples per step, but %s holds only %llu "
                "training samples",
                r->rc.batch, r->env->world, r->rc.batch, (unsigned long long)need, dir,
                (unsigned long long)r->data.n_train);
    /* Every rank may need any training sample during an epoch: read the set once (47 MB for MNIST). */
    uint64_t first;
    evaluate_share(r->data.n_test, r->env->world, world_rank(), &first, &r->data.test_count);
    /* One staging buffer for both reads, where the backend's memory is not the host's: sized for the larger (a
     * small training subset may sit beside the full test set). */
    uint64_t most = r->data.n_train > r->data.test_count ? r->data.n_train : r->data.test_count;
    uint8_t *images = NULL, *labels = NULL;
    if (!r->be->host_memory)
        images = xmalloc_aligned(most * MNIST_PIXELS), labels = xmalloc(most);
    read_to_backend(r->be, train, 0, r->data.n_train, images, labels, &r->data.train_images, &r->data.train_labels);
    read_to_backend(r->be, test, first, r->data.test_count, images, labels, &r->data.test_images, &r->data.test_labels);
    free(images);
    free(labels);
    say("data: %s: %llu training samples in %d shard%s, %llu test samples", dir, (unsigned long long)r->data.n_train,
        shards_files(train), shards_files(train) == 1 ? "" : "s", (unsigned long long)r->data.n_test);
    shards_close(train);
    shards_close(test);
    r->times.data_s = clock_now() - t0;
}

static void comm_start(run *r)
{
    comm_config cfg = {.bootstrap_addr = r->o->bootstrap_addr,
                       .timeout_s = r->o->comm_timeout,
                       .step_timeout_s = r->o->step_timeout,
                       .bucket_bytes = (size_t)(r->o->bucket_mb * 1048576.0),
                       .wire_bf16 = r->o->grad_comm == GRAD_COMM_BF16,
                       .alone = r->o->arm_alone,
                       .progress_us = r->o->comm_progress_us,
                       .shm = r->o->grad_shm,
                       .proxy = r->o->proxy.spec};
    r->comm = r->cb->create(r->env, &cfg, model_grads(r->m), model_num_params(r->m));
    float *shared = r->cb->grads ? r->cb->grads(r->comm) : NULL;
    if (shared)
        model_place_grads(r->m, shared);
    model_set_grad_hook(r->m, r->cb->ready, r->comm);
    model_set_poll_hook(r->m, r->cb->poll, r->comm);
}

/* Rank 0's state (resumed from a checkpoint, or parameters initialised or loaded) becomes everyone's. */
static void init_model(run *r)
{
    int resumed = checkpoint_resume(&r->ckpt, r->m, r->opt, &r->start);
    if (!resumed)
        r->start = (checkpoint_position){.epoch = 1};
    r->step = r->stop.saved_step = r->start.step;
    if (!resumed && r->o->load_model)
        model_file_verify(r->o->load_model);
    if (world_rank() == 0 && !resumed) {
        if (r->o->load_model)
            model_file_load(r->o->load_model, r->m);
        else
            model_init_params(r->m, r->o->seed);
    }
    r->cb->broadcast(r->comm, model_params(r->m), model_num_params(r->m), "initial parameters");
    if (model_buffer_size(r->m))
        r->cb->broadcast(r->comm, model_buffers(r->m), model_buffer_size(r->m), "initial BatchNorm statistics");
    size_t n;
    float *state = optim_state(r->opt, &n);
    if (resumed && n)
        r->cb->broadcast(r->comm, state, n, "optimizer state");
}

/* The settings a checkpoint must share with this run to continue its trajectory. */
static void describe_run(run *r)
{
    const options *o = r->o;
    checkpoint_identity *id = &r->ckpt.id;
    checkpoint_identity_add(id, "model", "%s", model_kind_names[o->model]);
    checkpoint_identity_add(id, "optimizer", "%s", optim_kind_names[r->rc.opt.kind]);
    checkpoint_identity_add(id, "lr", "%.17g", r->rc.lr);
    if (r->rc.lr_per_rank)
        checkpoint_identity_hint(id, "this model's default lr scales with the ranks: --lr with the file's value "
                                     "resumes it on as many as this run has");
    checkpoint_identity_add(id, "gamma", "%.17g", o->gamma);
    checkpoint_identity_add(id, "momentum", "%.9g", (double)r->rc.opt.momentum);
    checkpoint_identity_add(id, "weight_decay", "%.9g", (double)r->rc.opt.weight_decay);
    checkpoint_identity_add(id, "global_batch", "%llu",
                            (unsigned long long)r->env->world * (unsigned long long)r->rc.batch *
                                (unsigned long long)o->accum_steps);
    checkpoint_identity_add(id, "seed", "%llu", (unsigned long long)o->seed);
    checkpoint_identity_add(id, "precision", "%s", o->precision);
    checkpoint_identity_add_newer(id, "grad_comm", grad_comm_names[GRAD_COMM_FP32], grad_comm_names[o->grad_comm]);
    checkpoint_identity_add(id, "train_samples", "%llu", (unsigned long long)r->data.n_train);
    checkpoint_identity_add(id, "train_source_sha256", "%s", r->data.train_sha);
}

/* A checkpoint after optimizer step epoch_step of epoch (once per step). */
static void save_state(run *r, int epoch, uint64_t epoch_step)
{
    if (r->step == r->stop.saved_step)
        return;
    checkpoint_position p = {
        .step = r->step, .epoch = epoch, .epoch_step = (long)epoch_step, .restarts = r->start.restarts};
    profile_lap("progress, stop checks");
    stall_phase("checkpoint write", r->step);
    double t0 = clock_now();
    checkpoint_save(&r->ckpt, r->m, r->opt, &p);
    r->stop.ckpt_s = clock_now() - t0;
    profile_mark(); /* the write is counted apart, not as training */
    r->times.ckpt_total_s += r->stop.ckpt_s;
    r->stop.saved_step = r->step;
}

/* Copies the sample ids of this rank's slice of global batch `micro` into r->batch.ids. Returns its size. */
static int batch_ids(run *r, uint64_t micro)
{
    uint64_t first, count, global;
    sampler_slice(r->data.n_train, r->env->world, r->rc.batch, world_rank(), micro, &first, &count, &global);
    r->be->copy(r->batch.ids, r->batch.perm + first, count * sizeof *r->batch.ids);
    return (int)count;
}

/* One optimizer step's device work, queued or captured (step_graph.h): everything it passes by value is
 * here and in the step's shape. The first micro-batch's ids are copied before (a graph cannot). */
typedef struct {
    run *r;
    uint64_t micro0, k;
    int n0;
    step_shape shape;
} step_work;

static void queue_step(void *ctx)
{
    const step_work *w = ctx;
    run *r = w->r;
    for (uint64_t j = 0; j < w->k; j++) {
        int n = j == 0 ? w->n0 : batch_ids(r, w->micro0 + j);
        r->be->gather(r->data.train_images, r->data.train_labels, r->batch.ids, n, r->batch.x, r->batch.y);
        profile_lap("batch gather");
        r->cb->arm(r->comm, j + 1 == w->k, r->step);
        /* The loss stays on the device: nothing waits between backward and finish's last bucket. */
        model_train_batch(r->m, r->batch.x, r->batch.y, r->batch.ids, n, w->shape.dropout_key,
                          1.0f / (float)w->shape.total);
    }
    r->cb->finish(r->comm);
    profile_lap("all-reduce wait");
    /* The gradients start at zero (model.h), and the optimizer zeroes them again as it reads them. */
    optim_step_clear(r->opt, model_params(r->m), model_grads(r->m), (float)w->shape.lr);
    profile_lap("optimizer");
}

/* Whether the job's time limit is near: closer than a few of the longest steps, the last checkpoint's
 * write and a fixed safety (a step may run long, and the write must end before Slurm's kill). */
static int time_up(const run *r)
{
    if (!r->stop.job_end)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double margin = STOP_SAFETY_S + 3 * r->stop.step_max_s + r->stop.ckpt_s;
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec + margin >= r->stop.job_end;
}

/* After a step: whether a rank caught a signal or the time limit is near (only with checkpoints, which it
 * then writes). */
static int preempted(run *r, int epoch, uint64_t epoch_step)
{
    if (!r->o->checkpoint_dir)
        return 0;
    const char *option;
    double timeout = wait_deadline(r, &option);
    stall_phase("stop agreement", r->step);
    if (!(r->stop.signal = preempt_agree(&r->stop.signal_age, time_up(r), timeout, option, r->step)))
        return 0;
    r->stop.signal_seen = clock_now();
    save_state(r, epoch, epoch_step);
    return 1;
}

/* The backend's counts so far; zeros on a backend that does not count (the CPU). */
static nn_counts counts_now(const run *r) { return r->be->counts ? r->be->counts() : (nn_counts){0, 0, 0}; }

/* sum += the counts now - from. */
static void add_counts(const run *r, nn_counts *sum, nn_counts from)
{
    nn_counts now = counts_now(r);
    sum->kernels += now.kernels - from.kernels;
    sum->gemms += now.gemms - from.gemms;
    sum->waits += now.waits - from.waits;
}

/* The straggler variant (options.h): its rank sleeps before global step STEP (as the metrics number it, from
 * 1), outside every collective, as a rank slowed by its node would. The others wait for it at the end of their
 * backward, and the all-reduce line counts that wait apart. */
static void straggler_setup(run *r)
{
    const straggler_variant *s = &r->o->straggler;
    if (!s->text || s->rank != world_rank())
        return;
    r->straggle_step = s->step;
    r->straggle_s = s->seconds;
}

static void straggle(const run *r)
{
    if (r->step + 1 == r->straggle_step)
        clock_sleep(r->straggle_s);
}

/* Optimizer step s of the epoch: its micro-batches, and the samples in them over all ranks (the gradient of
 * their mean is what we want); *images: this rank's samples. */
static step_work step_plan(run *r, uint64_t s, uint64_t micro_steps, double lr, uint64_t dropout_key, double *images)
{
    const options *o = r->o;
    uint64_t micro0 = s * (uint64_t)o->accum_steps;
    uint64_t k = micro_steps - micro0 < (uint64_t)o->accum_steps ? micro_steps - micro0 : (uint64_t)o->accum_steps;
    step_work w = {.r = r, .micro0 = micro0, .k = k, .shape = {.lr = lr, .dropout_key = dropout_key}};
    *images = 0;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t f, c, g;
        sampler_slice(r->data.n_train, r->env->world, r->rc.batch, world_rank(), micro0 + j, &f, &c, &g);
        w.shape.total += g;
        *images += (double)c;
    }
    w.n0 = batch_ids(r, micro0);
    return w;
}

/* After step s: the progress line, a checkpoint (periodic ones, and one where the run stops, so the same
 * command then has nothing left to redo), the stop agreement. Returns stop, 2 where a signal stops the run. */
static int step_after(run *r, epoch_log *L, int epoch, uint64_t s, double lr, int stop)
{
    const options *o = r->o;
    int last = s + 1 == L->steps;
    if ((s + 1) % (uint64_t)o->log_interval == 0 || last || stop)
        report_progress(r, L, epoch, s, lr);
    if (o->checkpoint_dir &&
        (stop || (last && epoch == o->epochs) || (o->checkpoint_every ? r->step % o->checkpoint_every == 0 : last)))
        save_state(r, epoch, s + 1);
    return preempted(r, epoch, s + 1) ? 2 : stop;
}

/* One epoch; returns 1 when --max-steps was reached, 2 when a signal stopped it. */
static int train_epoch(run *r, int epoch, double lr, double *mean_loss)
{
    const options *o = r->o;
    uint64_t micro_steps = sampler_steps(r->data.n_train, r->env->world, r->rc.batch);
    uint64_t opt_steps = (micro_steps + (uint64_t)o->accum_steps - 1) / (uint64_t)o->accum_steps;
    uint64_t dropout_key = rng_key(rng_key(o->seed ^ DROPOUT_SALT, 0), (uint64_t)epoch);
    sampler_permutation(o->seed, (uint64_t)epoch, r->data.n_train, r->batch.host_perm);
    r->be->upload(r->batch.perm, r->batch.host_perm, r->data.n_train * sizeof *r->batch.perm);

    int stop = o->max_steps && r->step >= o->max_steps;
    /* A resumed epoch goes on after the steps its checkpoint had done. */
    epoch_log L = {.first = epoch == r->start.epoch ? (uint64_t)r->start.epoch_step : 0,
                   .steps = opt_steps,
                   .t0 = clock_now(),
                   .ckpt0 = r->times.ckpt_total_s};
    L.t_log = L.t0;
    nn_counts c0 = counts_now(r);
    long step0 = r->step;
    profile_mark();
    for (uint64_t s = L.first; s < opt_steps && !stop; s++) {
        double t_step = clock_now();
        stall_phase("training", r->step);
        profile_hold();
        double images;
        step_work w = step_plan(r, s, micro_steps, lr, dropout_key, &images);
        straggle(r);
        /* A graph replays only full batches without accumulation (kernel arguments are frozen in it). */
        int replayable = o->accum_steps == 1 && w.shape.total == (uint64_t)r->rc.batch * (uint64_t)r->env->world;
        step_graph_step(r->graph, &w.shape, replayable, r->step, queue_step, &w);
        r->step++;
        if (clock_now() - t_step > r->stop.step_max_s)
            r->stop.step_max_s = clock_now() - t_step;
        L.images_log += images; /* this rank's samples: summed over ranks in the report */
        stop = step_after(r, &L, epoch, s, lr, (o->max_steps && r->step >= o->max_steps) || o->dry_run);
        profile_lap("progress, stop checks");
    }
    /* checkpoint writes are counted apart */
    r->times.train_s += clock_now() - L.t0 - (r->times.ckpt_total_s - L.ckpt0);
    add_counts(r, &r->times.step_counts, c0);
    r->times.counted_steps += r->step - step0;
    r->times.images += L.images_epoch;
    *mean_loss = L.images_epoch ? L.loss_epoch / L.images_epoch : 0;
    return stop;
}

/* The test set's loss and accuracy (collective), its time counted as evaluation. */
static eval_result run_evaluate(run *r)
{
    double t0 = clock_now();
    stall_phase("evaluation", r->step);
    narrow_deadline(r, 1);
    eval_result ev = evaluate(r->m, r->data.test_images, r->data.test_labels, r->data.test_count, r->batch.x);
    narrow_deadline(r, 0);
    r->times.eval_s += clock_now() - t0;
    return ev;
}

const nn_backend *train_cpu_backend(const char *conv, int gemm, char *desc, size_t len)
{
    gemm_use_own(gemm == 0);
    const nn_backend *be = nn_cpu_conv(conv);
    if (!be)
        die_all(EX_UNAVAILABLE,
                "option --conv %s: this mnist_ddp was built without oneDNN (apt-get install "
                "libdnnl-dev, then ./configure --with-onednn)",
                conv);
    int avx2 = !strcmp(wino43_isa(), "AVX2"); /* AVX-512 the usual case: only AVX2 is named */
    if (desc && (be == &nn_cpu || (be == nn_cpu_own() && !wino43_has_cpu())))
        snprintf(desc, len, "cpu, im2col conv");
    else if (desc && be == nn_cpu_own())
        snprintf(desc, len, "cpu, own Winograd%s", avx2 ? " AVX2" : "");
    else if (desc)
        snprintf(desc, len, "cpu, oneDNN %s %s%s", onednn_version(),
                 be == nn_cpu_onednn(WINO_NONE)                      ? "direct"
                 : be == nn_cpu_onednn(WINO_OWN) && wino43_has_cpu() ? "own Winograd"
                 : !onednn_has_winograd()                            ? "no Winograd"
                                                                     : "Winograd",
                 be == nn_cpu_onednn(WINO_OWN) && avx2 ? " AVX2" : "");
    return be;
}

/* The GPU backend's NN_CUDA_* bits: the precision and the kernels' variants (options.h). */
static unsigned cuda_switches(const options *o)
{
    static const unsigned conv2[] = {[CONV2_IM2COL] = 0,
                                     [CONV2_DIRECT] = NN_CUDA_CONV2_DIRECT,
                                     [CONV2_3XTF32] = NN_CUDA_CONV2_DIRECT | NN_CUDA_3XTF32};
    return (strcmp(o->precision, "tf32") == 0 ? NN_CUDA_TF32 : 0) |
           (o->conv1 == CONV1_DIRECT ? NN_CUDA_CONV1_DIRECT : 0) | (o->head == HEAD_FUSED ? NN_CUDA_HEAD_FUSED : 0) |
           (o->pool == POOL_FUSED ? NN_CUDA_POOL_FUSED : 0) | conv2[o->conv2] |
           (o->backward == BACKWARD_FORKED ? NN_CUDA_FORKED : 0) | (o->fc == FC_EPILOGUE ? NN_CUDA_FC_EPILOGUE : 0);
}

/* Everything a run needs before its first step, on the device chosen by main (gpu). */
static void run_setup(run *r, int gpu)
{
    const options *o = r->o;
    options_check_variants(o, gpu, r->env->world);
    r->be = gpu ? nn_cuda(cuda_switches(o)) : train_cpu_backend(o->conv, o->gemm, NULL, 0);
    r->cb = gpu ? comm_nccl() : &comm_mpi;
    if (o->save_model)
        model_file_check_writable("--save-model", o->save_model, o->save_model);
    if (o->checkpoint_dir) {
        checkpoint_prepare_dir(o->checkpoint_dir); /* the signal handlers are main's, from its start */
        if ((r->stop.job_end = preempt_job_end()))
            say("the job ends in %.0f s: stopping with a checkpoint %.0f s plus a few steps and a checkpoint "
                "write before that",
                r->stop.job_end - (double)time(NULL), STOP_SAFETY_S);
    }
    straggler_setup(r);
    load_data(r);
    r->ckpt = (checkpoint_config){
        .dir = o->checkpoint_dir, .resume = o->resume, .keep = o->checkpoint_keep, .timeout_s = o->comm_timeout};
    describe_run(r);
    /* The training batch, or evaluation's chunks where larger: those at most 256 images, whose activations are
     * ~240 MB (evaluation runs the test set in chunks of the capacity, whatever --test-batch-size says). */
    int eval_chunk = o->test_batch_size < 256 ? o->test_batch_size : 256;
    int capacity = r->rc.batch > eval_chunk ? r->rc.batch : eval_chunk;
    r->m = model_create_on(r->be, o->model, capacity);
    comm_start(r);
    r->opt = optim_create_on(r->be, &r->rc.opt, model_num_params(r->m));
    init_model(r);
    r->batch.x = r->be->alloc((size_t)capacity * MNIST_PIXELS * sizeof(float));
    r->batch.y = r->be->alloc((size_t)capacity);
    r->batch.perm = r->be->alloc(r->data.n_train * sizeof *r->batch.perm);
    r->batch.ids = r->be->alloc((size_t)r->rc.batch * sizeof *r->batch.ids);
    r->graph = step_graph_create(r->be, r->cb, r->comm, o->cuda_graph, o->comm_timeout);
    r->batch.host_perm = xmalloc(r->data.n_train * sizeof *r->batch.host_perm);
    r->host_params = xmalloc(model_num_params(r->m) * sizeof *r->host_params);

    int world = r->env->world;
    uint64_t per_step = (uint64_t)r->rc.batch * (uint64_t)world * (uint64_t)o->accum_steps;
    uint64_t micro = sampler_steps(r->data.n_train, world, r->rc.batch);
    uint64_t steps = (micro + (uint64_t)o->accum_steps - 1) / (uint64_t)o->accum_steps;
    if ((uint64_t)o->accum_steps > micro && world_rank() == 0)
        warn("--accum-steps %d: an epoch holds %llu batches per rank, so each epoch is one optimizer step over them",
             o->accum_steps, (unsigned long long)micro);
    say("model %s: %zu parameters (%.1f MiB on %s with activations and scratch); optimizer %s lr %g gamma %g; "
        "batch %d per rank x %d rank%s x %d accum = %llu per step; %llu step%s per epoch",
        model_name(r->m), model_num_params(r->m), (double)model_backend_bytes(r->m) / 1048576.0, r->be->name,
        optim_kind_names[r->rc.opt.kind], r->rc.lr, o->gamma, r->rc.batch, world, world == 1 ? "" : "s", o->accum_steps,
        (unsigned long long)per_step, (unsigned long long)steps, steps == 1 ? "" : "s");
    report_run(r, steps);
}

/* One epoch of training, the replica check and the evaluation, with their report. Returns 1 when the run
 * stops early (--max-steps, --dry-run). */
static int run_epoch(run *r, int epoch, eval_result *ev)
{
    double lr = r->rc.lr * pow(r->o->gamma, epoch - 1), train_loss, t0 = clock_now();
    double s0 = r->times.train_s, i0 = r->times.images;
    int stop = train_epoch(r, epoch, lr, &train_loss);
    if (stop == 2)
        return stop; /* preempted: out at once, the checkpoint holds the rest */
    char when[64];
    snprintf(when, sizeof when, "after epoch %d", epoch);
    sync_and_check(r, when);
    *ev = run_evaluate(r);
    double epoch_s = clock_now() - t0, ips = (r->times.images - i0) / (r->times.train_s - s0);
    say("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%% (%ld/%ld), %.1f s, %.0f images/s", epoch,
        train_loss, ev->loss, 100 * ev->accuracy, ev->correct, ev->total, epoch_s, ips);
    metrics("{\"type\":\"epoch\",\"epoch\":%d,\"train_loss\":%.6f,\"test_loss\":%.6f,\"test_accuracy\":%.6f,"
            "\"correct\":%ld,\"epoch_s\":%.3f,\"images_per_s\":%.1f}",
            epoch, train_loss, ev->loss, ev->accuracy, ev->correct, epoch_s, ips);
    if (stop)
        say("stopping: %s", r->o->dry_run ? "--dry-run" : "--max-steps reached");
    return stop;
}

static void run_teardown(run *r)
{
    const nn_backend *be = r->be;
    step_graph_free(r->graph);
    r->cb->destroy(r->comm);
    optim_free(r->opt);
    model_free(r->m);
    void *device[] = {r->batch.x,           r->batch.y,           r->batch.perm,       r->batch.ids,
                      r->data.train_images, r->data.train_labels, r->data.test_images, r->data.test_labels};
    for (size_t i = 0; i < sizeof device / sizeof *device; i++)
        be->free(device[i]);
    free(r->batch.host_perm);
    free(r->host_params);
}

int train_run(const options *o, const ddp_env *env, int gpu)
{
    run r = {.o = o, .env = env, .rc = resolve_recipe(o, env->world)};
    profile_enable(o->profile);
    run_setup(&r, gpu);
    double t_start = clock_now();
    r.times.startup_s = t_start - env->start_s - r.times.data_s;
    eval_result ev = {0};
    int epoch = r.start.epoch - 1;
    if (epoch >= o->epochs) { /* nothing to train: --epochs 0, or a resumed run that had finished */
        ev = run_evaluate(&r);
        say("evaluation: test loss %.4f, test accuracy %.2f%% (%ld/%ld)", ev.loss, 100 * ev.accuracy, ev.correct,
            ev.total);
    }
    while (epoch < o->epochs && !run_epoch(&r, ++epoch, &ev))
        ;
    if (!r.stop.signal)
        run_summary(&r, &ev, epoch, clock_now() - t_start);
    run_teardown(&r);
    if (!r.stop.signal)
        return 0;
    if (r.stop.signal == PREEMPT_TIME_LIMIT)
        say("stopped before the job's time limit at step %ld (%.0f s left): checkpoint written, exit 75 (run the same "
            "command to resume)",
            r.step, r.stop.job_end - (double)time(NULL));
    else
        say("stopped by %s at step %ld: checkpoint written, exit 75 (run the same command to resume); %.2f s from "
            "the signal to the exit",
            preempt_name(r.stop.signal), r.step, r.stop.signal_age + clock_now() - r.stop.signal_seen);
    return EX_TEMPFAIL;
}
