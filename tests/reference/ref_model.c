/* Driver for the PyTorch cross-check (tests/reference/compare_model.py):
 *   ref_model MODEL SEED BATCH OUT.h5
 * builds MODEL, initialises it from SEED, makes a deterministic batch (random uint8 images and
 * labels from rng.h, scattered sample ids), runs one training forward/backward (grad_scale 1/n,
 * i.e. the mean loss), an eval pass, two steps each of Adadelta and SGD from the initial
 * parameters, and a final eval pass, and writes all inputs and results to OUT.h5. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "nn/model.h"
#include "nn/cpu/conv_choice.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/optim.h"
#include "base/rng.h"

static void write_data(hid_t loc, const char *name, hid_t type, int ndim, const hsize_t *dims, const void *data)
{
    hid_t space = ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t set = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (space < 0 || set < 0 || H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        die(EX_IOERR, "cannot write dataset %s", name);
    H5Dclose(set);
    H5Sclose(space);
}

static void write_scalar(hid_t loc, const char *name, hid_t type, const void *value)
{
    write_data(loc, name, type, 0, NULL, value);
}

/* One dataset per tensor, named as in the state_dict, under group `group`. */
static void write_tensors(hid_t file, const char *group, const tensor_desc *(*desc)(const model *, int), int n,
                          const model *m, const float *base)
{
    hid_t g = H5Gcreate2(file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        die(EX_IOERR, "cannot create group %s", group);
    for (int i = 0; i < n; i++) {
        const tensor_desc *d = desc(m, i);
        hsize_t dims[4];
        for (int k = 0; k < d->ndim; k++)
            dims[k] = (hsize_t)d->shape[k];
        write_data(g, d->name, H5T_NATIVE_FLOAT, d->ndim, dims, base + d->offset);
        /* The flat-buffer offset, so the reference checks the layout too. */
        hid_t space = H5Screate(H5S_SCALAR);
        unsigned long long off = d->offset;
        hid_t attr =
            H5Acreate_by_name(g, d->name, "offset", H5T_NATIVE_ULLONG, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (attr < 0 || H5Awrite(attr, H5T_NATIVE_ULLONG, &off) < 0)
            die(EX_IOERR, "cannot write the offset of %s", d->name);
        H5Aclose(attr);
        H5Sclose(space);
    }
    H5Gclose(g);
}

/* The deterministic batch: random uint8 images and labels, scattered sample ids, the dropout key. */
typedef struct {
    int n;
    uint8_t *images, *labels;
    uint64_t *ids, dropout_key;
    float *x;
} ref_batch;

static ref_batch make_batch(uint64_t seed, int n)
{
    size_t npix = (size_t)n * 784;
    ref_batch b = {n,
                   malloc(npix),
                   malloc((size_t)n),
                   malloc((size_t)n * sizeof *b.ids),
                   rng_key(seed, 1003),
                   malloc(npix * sizeof *b.x)};
    for (size_t i = 0; i < npix; i++)
        b.images[i] = (uint8_t)rng_below(rng_key(seed, 1001), i, 256);
    for (int i = 0; i < n; i++) {
        b.labels[i] = (uint8_t)rng_below(rng_key(seed, 1002), (uint64_t)i, 10);
        b.ids[i] = 59999 - 7 * (uint64_t)i;
    }
    cpu_normalize(b.images, npix, b.x);
    return b;
}

static void write_batch(hid_t f, const ref_batch *b)
{
    hsize_t img_dims[4] = {(hsize_t)b->n, 1, 28, 28}, nd = (hsize_t)b->n;
    write_data(f, "images", H5T_NATIVE_UINT8, 4, img_dims, b->images);
    write_data(f, "x", H5T_NATIVE_FLOAT, 4, img_dims, b->x);
    write_data(f, "labels", H5T_NATIVE_UINT8, 1, &nd, b->labels);
    write_data(f, "ids", H5T_NATIVE_UINT64, 1, &nd, b->ids);
    write_scalar(f, "dropout_key", H5T_NATIVE_UINT64, &b->dropout_key);
}

static double train_pass(model *m, const ref_batch *b)
{
    memset(model_grads(m), 0, model_num_params(m) * sizeof(float));
    return model_forward_backward(m, b->x, b->labels, b->ids, b->n, b->dropout_key, 1.0f / (float)b->n);
}

static void write_eval(hid_t f, const char *loss_name, const char *correct_name, model *m, const ref_batch *b)
{
    long correct = 0;
    double loss = model_evaluate(m, b->x, b->labels, b->n, &correct);
    write_scalar(f, loss_name, H5T_NATIVE_DOUBLE, &loss);
    write_scalar(f, correct_name, H5T_NATIVE_LONG, &correct);
}

/* Adadelta as in the PyTorch example (lr 1.0); SGD with momentum and weight decay. Each step recomputes the
 * gradients (the first step's equal the ones of the first pass), so both sides run the same sequence of
 * training passes and BatchNorm running-stat updates. Each run starts from the parameters p0. */
static void write_optim_runs(hid_t f, model *m, const ref_batch *b, const float *p0)
{
    const struct {
        const char *group;
        optim_cfg cfg;
        float lr;
    } runs[2] = {{"adadelta", {OPTIM_ADADELTA, 0.9f, 1e-6f, 0.0f, 0.0f}, 1.0f},
                 {"sgd", {OPTIM_SGD, 0.0f, 0.0f, 0.9f, 1e-3f}, 0.05f}};
    size_t np = model_num_params(m);
    float *params = model_params(m);
    for (int r = 0; r < 2; r++) {
        hid_t g = H5Gcreate2(f, runs[r].group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        write_scalar(g, "lr", H5T_NATIVE_FLOAT, &runs[r].lr);
        write_scalar(g, "rho", H5T_NATIVE_FLOAT, &runs[r].cfg.rho);
        write_scalar(g, "eps", H5T_NATIVE_FLOAT, &runs[r].cfg.eps);
        write_scalar(g, "momentum", H5T_NATIVE_FLOAT, &runs[r].cfg.momentum);
        write_scalar(g, "weight_decay", H5T_NATIVE_FLOAT, &runs[r].cfg.weight_decay);
        optim *o = optim_create_on(&nn_cpu, &runs[r].cfg, np);
        memcpy(params, p0, np * sizeof *params);
        for (int step = 1; step <= 2; step++) {
            char name[64];
            double l = train_pass(m, b);
            snprintf(name, sizeof name, "loss%d_sum", step);
            write_scalar(g, name, H5T_NATIVE_DOUBLE, &l);
            optim_step(o, params, model_grads(m), runs[r].lr);
            snprintf(name, sizeof name, "%s/step%d", runs[r].group, step);
            write_tensors(f, name, model_tensor, model_num_tensors(m), m, params);
        }
        optim_free(o);
        H5Gclose(g);
    }
}

int main(int argc, char **argv)
{
    error_set_program("ref_model");
    if (argc != 5 && argc != 6)
        die(EX_USAGE, "usage: ref_model MODEL SEED BATCH OUT.h5 [im2col|onednn|winograd]");
    uint64_t seed = strtoull(argv[2], NULL, 10);
    int n = atoi(argv[3]);
    const nn_backend *be = argc == 6 ? nn_cpu_conv(argv[5]) : &nn_cpu;
    if (!be) {
        printf("ref_model: built without oneDNN\n");
        return 77;
    }
    model *m = model_create_on(be, model_kind_of(argv[1]), n > 0 ? n : 1);
    if (!m || n < 1)
        die(EX_USAGE, "unknown model '%s' or bad batch size '%s'", argv[1], argv[3]);
    model_init_params(m, seed);
    size_t np = model_num_params(m);
    int nt = model_num_tensors(m), nbt = model_num_buffers(m);
    float *p0 = malloc(np * sizeof *p0);
    memcpy(p0, model_params(m), np * sizeof *p0);
    ref_batch b = make_batch(seed, n);

    hid_t f = H5Fcreate(argv[4], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        die(EX_CANTCREAT, "cannot create %s", argv[4]);
    write_batch(f, &b);
    write_tensors(f, "init", model_tensor, nt, m, model_params(m));
    write_tensors(f, "init_buffers", model_buffer, nbt, m, model_buffers(m));

    double loss = train_pass(m, &b);
    write_scalar(f, "loss_sum", H5T_NATIVE_DOUBLE, &loss);
    write_tensors(f, "grad", model_tensor, nt, m, model_grads(m));
    write_tensors(f, "buffers", model_buffer, nbt, m, model_buffers(m));
    write_eval(f, "eval_loss_sum", "eval_correct", m, &b);
    write_optim_runs(f, m, &b, p0);
    /* Eval again with the last parameters and running stats moved by five training passes. */
    write_eval(f, "final_eval_loss_sum", "final_eval_correct", m, &b);
    write_tensors(f, "final_buffers", model_buffer, nbt, m, model_buffers(m));
    if (H5Fclose(f) < 0)
        die(EX_IOERR, "cannot close %s", argv[4]);
    free(b.images), free(b.labels), free(b.ids), free(b.x), free(p0);
    model_free(m);
    return 0;
}
