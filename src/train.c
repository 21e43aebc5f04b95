#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint.h"
#include "comm.h"
#include "errors.h"
#include "evaluate.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "sampler.h"
#include "shards.h"

enum { PIXELS = 28 * 28 };
/* Domain separation of the seed: shuffles and dropout masks draw from unrelated streams. */
#define DROPOUT_SALT 0x64726f706f757421ULL

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The recipe of each model (PyTorch examples); options override it. */
typedef struct {
    int batch;
    optim_cfg opt;
    double lr;
} recipe;

static recipe resolve_recipe(const options *o, int world)
{
    int convnet = strcmp(o->model, "convnet") == 0;
    recipe r = {.batch = o->batch_size ? o->batch_size : convnet ? 100 : 64};
    const char *opt = o->optimizer ? o->optimizer : convnet ? "sgd" : "adadelta";
    r.opt = (optim_cfg){.kind = strcmp(opt, "sgd") == 0 ? OPTIM_SGD : OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f,
                        .momentum = (float)o->momentum, .weight_decay = (float)o->weight_decay};
    /* The convnet recipe scales its learning rate with the world size (linear scaling rule). */
    r.lr = o->lr >= 0 ? o->lr : convnet ? 1e-4 * world : 1.0;
    return r;
}

typedef struct {
    const options *o;
    const ddp_env *env;
    recipe rc;
    model *m;
    optim *opt;
    grad_comm *gc;
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    uint64_t n_train, n_test, test_count;
    float *x;
    uint8_t *y;
    uint64_t *perm, *ids;
    long step;             /* optimizer steps so far */
    double train_s, images;
} run;

static void load_data(run *r)
{
    const char *dir = r->o->data_dir;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        die_all(EX_NOINPUT, "--data %s: no such directory; prepare MNIST with 'make data' (or pass --data DIR)", dir);
    shard_set *train = shards_open(dir, "train");
    shard_set *test = shards_open(dir, "test");
    r->n_train = shards_total(train);
    r->n_test = shards_total(test);
    uint64_t need = (uint64_t)r->env->world * (uint64_t)r->rc.batch;
    if (r->n_train < need)
        die_all(EX_USAGE, "--batch-size %d: %d ranks x %d = %llu samples per step, but %s holds only %llu "
                "training samples", r->rc.batch, r->env->world, r->rc.batch, (unsigned long long)need, dir,
                (unsigned long long)r->n_train);
    /* Every rank may need any training sample during an epoch: read the set once (47 MB for MNIST). */
    r->train_images = xmalloc_aligned(r->n_train * PIXELS);
    r->train_labels = xmalloc(r->n_train);
    shards_read_range(train, 0, r->n_train, r->train_images, r->train_labels);
    uint64_t first;
    evaluate_share(r->n_test, r->env->world, r->env->rank, &first, &r->test_count);
    r->test_images = xmalloc_aligned(r->test_count * PIXELS);
    r->test_labels = xmalloc(r->test_count);
    shards_read_range(test, first, r->test_count, r->test_images, r->test_labels);
    say("data: %s: %llu training samples in %d shard%s, %llu test samples", dir, (unsigned long long)r->n_train,
        shards_files(train), shards_files(train) == 1 ? "" : "s", (unsigned long long)r->n_test);
    shards_close(train);
    shards_close(test);
}

/* Rank 0's parameters (initialised or loaded) become everyone's. */
static void init_model(run *r)
{
    if (r->env->rank == 0) {
        if (r->o->load_model)
            checkpoint_load_model(r->o->load_model, r->m);
        else
            model_init_params(r->m, r->o->seed);
    }
    MPI_CHECK(MPI_Bcast(model_params(r->m), (int)model_num_params(r->m), MPI_FLOAT, 0, MPI_COMM_WORLD));
    if (model_buffer_size(r->m))
        MPI_CHECK(MPI_Bcast(model_buffers(r->m), (int)model_buffer_size(r->m), MPI_FLOAT, 0, MPI_COMM_WORLD));
}

/* Gathers this rank's slice of global batch `micro` into x/y/ids; returns its size. */
static int gather_batch(run *r, uint64_t micro, uint64_t *global_count)
{
    uint64_t first, count;
    sampler_slice(r->n_train, r->env->world, r->rc.batch, r->env->rank, micro, &first, &count, global_count);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t s = r->perm[first + i];
        r->ids[i] = s;
        r->y[i] = r->train_labels[s];
        model_normalize(r->train_images + s * PIXELS, PIXELS, r->x + i * PIXELS);
    }
    return (int)count;
}

/* One epoch; returns 1 when --max-steps was reached. */
static int train_epoch(run *r, int epoch, double lr, double *mean_loss)
{
    const options *o = r->o;
    uint64_t micro_steps = sampler_steps(r->n_train, r->env->world, r->rc.batch);
    uint64_t opt_steps = (micro_steps + (uint64_t)o->accum_steps - 1) / (uint64_t)o->accum_steps;
    uint64_t dropout_key = rng_key(rng_key(o->seed ^ DROPOUT_SALT, 0), (uint64_t)epoch);
    sampler_permutation(o->seed, (uint64_t)epoch, r->n_train, r->perm);

    double t0 = now(), t_log = t0, loss_epoch = 0, loss_log = 0, images_log = 0, images_epoch = 0;
    int stop = 0;
    for (uint64_t s = 0; s < opt_steps && !stop; s++) {
        uint64_t micro0 = s * (uint64_t)o->accum_steps;
        uint64_t k = micro_steps - micro0 < (uint64_t)o->accum_steps ? micro_steps - micro0 : (uint64_t)o->accum_steps;
        /* Samples in this optimizer step over all ranks: the gradient of their mean is what we want. */
        uint64_t total = 0;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t f, c, g;
            sampler_slice(r->n_train, r->env->world, r->rc.batch, 0, micro0 + j, &f, &c, &g);
            total += g;
        }
        memset(model_grads(r->m), 0, model_num_params(r->m) * sizeof(float));
        double loss = 0, images = 0;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t g;
            int n = gather_batch(r, micro0 + j, &g);
            grad_comm_arm(r->gc, j + 1 == k, r->step);
            loss += model_forward_backward(r->m, r->x, r->y, r->ids, n, dropout_key, 1.0f / (float)total);
            images += n;
        }
        grad_comm_finish(r->gc);
        optim_step(r->opt, model_params(r->m), model_grads(r->m), (float)lr);
        r->step++;
        loss_log += loss;
        images_log += images; /* this rank's samples: summed over ranks below */
        stop = (o->max_steps && r->step >= o->max_steps) || o->dry_run;
        if ((s + 1) % (uint64_t)o->log_interval == 0 || s + 1 == opt_steps || stop) {
            double sums[2] = {loss_log, images_log};
            /* Every rank's local loss sum: the line shows the loss of all ranks' samples. */
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
            double t = now();
            say("epoch %d step %llu/%llu loss %.4f lr %.4g images/s %.0f", epoch, (unsigned long long)(s + 1),
                (unsigned long long)opt_steps, sums[0] / sums[1], lr, sums[1] / (t - t_log));
            metrics("{\"type\":\"step\",\"epoch\":%d,\"step\":%llu,\"global_step\":%ld,\"loss\":%.6f,\"lr\":%.6g,"
                    "\"images_per_s\":%.1f}", epoch, (unsigned long long)(s + 1), r->step, sums[0] / sums[1], lr,
                    sums[1] / (t - t_log));
            loss_epoch += sums[0];
            images_epoch += sums[1];
            loss_log = images_log = 0;
            t_log = t;
        }
    }
    r->train_s += now() - t0;
    r->images += images_epoch;
    *mean_loss = images_epoch ? loss_epoch / images_epoch : 0;
    return stop;
}

/* BatchNorm statistics are per rank (local batches); averaging them makes replicas identical again. */
static void sync_and_check(run *r, const char *when)
{
    comm_average(MPI_COMM_WORLD, model_buffers(r->m), model_buffer_size(r->m));
    comm_check_replicas(MPI_COMM_WORLD, model_params(r->m), model_num_params(r->m), when);
}

int train_run(const options *o, const ddp_env *env)
{
    run r = {.o = o, .env = env, .rc = resolve_recipe(o, env->world)};
    if (o->save_model)
        checkpoint_check_writable("--save-model", o->save_model);
    load_data(&r);

    int capacity = r.rc.batch > o->test_batch_size ? r.rc.batch : o->test_batch_size;
    if (capacity > 256 && capacity > r.rc.batch)
        capacity = 256; /* bounds evaluation memory: activations of 256 images are ~240 MB */
    r.m = model_create(o->model, capacity);
    init_model(&r);
    r.opt = optim_create(&r.rc.opt, model_num_params(r.m));
    size_t bucket = (size_t)(o->bucket_mb * 1048576.0);
    r.gc = grad_comm_create(MPI_COMM_WORLD, model_grads(r.m), model_num_params(r.m), bucket, o->comm_timeout);
    model_set_grad_hook(r.m, grad_comm_ready, r.gc);
    r.x = xmalloc_aligned((size_t)capacity * PIXELS * sizeof(float));
    r.y = xmalloc((size_t)capacity);
    r.ids = xmalloc((size_t)capacity * sizeof *r.ids);
    r.perm = xmalloc(r.n_train * sizeof *r.perm);

    say("model %s: %zu parameters; optimizer %s lr %g gamma %g; batch %d per rank x %d rank%s x %d accum = %llu "
        "per step; %llu steps per epoch", o->model, model_num_params(r.m),
        r.rc.opt.kind == OPTIM_SGD ? "sgd" : "adadelta", r.rc.lr, o->gamma, r.rc.batch, env->world,
        env->world == 1 ? "" : "s", o->accum_steps,
        (unsigned long long)((uint64_t)r.rc.batch * (uint64_t)env->world * (uint64_t)o->accum_steps),
        (unsigned long long)((sampler_steps(r.n_train, env->world, r.rc.batch) + (uint64_t)o->accum_steps - 1) /
                             (uint64_t)o->accum_steps));

    double t_start = now();
    eval_result ev = {0};
    int epoch = 0;
    if (o->epochs == 0) {
        ev = evaluate(r.m, r.test_images, r.test_labels, r.test_count, r.x, MPI_COMM_WORLD);
        say("evaluation: test loss %.4f, test accuracy %.2f%% (%ld/%ld)", ev.loss, 100 * ev.accuracy, ev.correct,
            ev.total);
    }
    for (epoch = 1; epoch <= o->epochs; epoch++) {
        double lr = r.rc.lr * pow(o->gamma, epoch - 1), train_loss, t0 = now(), s0 = r.train_s, i0 = r.images;
        int stop = train_epoch(&r, epoch, lr, &train_loss);
        char when[64];
        snprintf(when, sizeof when, "after epoch %d", epoch);
        sync_and_check(&r, when);
        ev = evaluate(r.m, r.test_images, r.test_labels, r.test_count, r.x, MPI_COMM_WORLD);
        double epoch_s = now() - t0, ips = (r.images - i0) / (r.train_s - s0);
        say("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%% (%ld/%ld), %.1f s, %.0f images/s",
            epoch, train_loss, ev.loss, 100 * ev.accuracy, ev.correct, ev.total, epoch_s, ips);
        metrics("{\"type\":\"epoch\",\"epoch\":%d,\"train_loss\":%.6f,\"test_loss\":%.6f,\"test_accuracy\":%.6f,"
                "\"correct\":%ld,\"epoch_s\":%.3f,\"images_per_s\":%.1f}", epoch, train_loss, ev.loss, ev.accuracy,
                ev.correct, epoch_s, ips);
        if (stop) {
            say("stopping: %s", o->dry_run ? "--dry-run" : "--max-steps reached");
            break;
        }
    }
    if (epoch > o->epochs)
        epoch = o->epochs;
    double total_s = now() - t_start;
    grad_comm_stats cs = grad_comm_get_stats(r.gc);
    double exposed = cs.reductions ? cs.exposed_s / (double)cs.reductions : 0;
    double hidden = cs.blocking_s > 0 ? 1 - exposed / cs.blocking_s : 0;
    hidden = hidden < 0 ? 0 : hidden;
    double ips = r.train_s > 0 ? r.images / r.train_s : 0;
    if (env->world > 1)
        say("all-reduce: %.2f ms blocking for %.1f MB, %.2f ms exposed per step in %d bucket%s: %.0f%% hidden behind "
            "backward", 1e3 * cs.blocking_s, 4e-6 * (double)model_num_params(r.m), 1e3 * exposed, cs.buckets,
            cs.buckets == 1 ? "" : "s", 100 * hidden);
    say("summary: test accuracy %.2f%%, %d epoch%s, %ld steps, train %.1f s, total %.1f s, %.0f images/s, %d rank%s",
        100 * ev.accuracy, epoch, epoch == 1 ? "" : "s", r.step, r.train_s, total_s, ips, env->world,
        env->world == 1 ? "" : "s");
    metrics("{\"type\":\"summary\",\"model\":\"%s\",\"world\":%d,\"epochs\":%d,\"steps\":%ld,\"test_accuracy\":%.6f,"
            "\"test_loss\":%.6f,\"train_s\":%.3f,\"total_s\":%.3f,\"images_per_s\":%.1f,\"allreduce_blocking_ms\":%.3f,"
            "\"allreduce_exposed_ms\":%.3f,\"allreduce_hidden\":%.3f,\"fingerprint\":\"%016llx\"}",
            o->model, env->world, epoch, r.step, ev.accuracy, ev.loss, r.train_s, total_s, ips, 1e3 * cs.blocking_s,
            1e3 * exposed, hidden,
            (unsigned long long)buffer_fingerprint(model_params(r.m), model_num_params(r.m)));
    sync_and_check(&r, "at the end");
    if (o->verbose)
        say("replica fingerprint %016llx",
            (unsigned long long)buffer_fingerprint(model_params(r.m), model_num_params(r.m)));
    if (o->save_model && env->rank == 0) {
        checkpoint_save_model(o->save_model, r.m, epoch, ev.accuracy);
        say("model saved to %s", o->save_model);
    }
    grad_comm_free(r.gc);
    optim_free(r.opt);
    model_free(r.m);
    free(r.x), free(r.y), free(r.ids), free(r.perm);
    free(r.train_images), free(r.train_labels), free(r.test_images), free(r.test_labels);
    return 0;
}
