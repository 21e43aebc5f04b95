/* libFuzzer harness: the readers of files mnist_ddp writes, on the input as that file: --load-model
 * (model_file_load, into both models) and --resume FILE (checkpoint_resume, into convnet with SGD, the
 * smallest training state). checkpoint_resume is collective, so the harness is a one-rank MPI job. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "data/h5util.h"
#include "train/model_file.h"
#include "nn/model.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/optim.h"
#include "train/checkpoint.h"

static model *net, *convnet;
static optim *sgd;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    MPI_Init(NULL, NULL);
    h5_quiet(); /* HDF5's error stack printing off, as the program's readers have it */
    net = model_create_on(&nn_cpu, MODEL_NET, 1);
    convnet = model_create_on(&nn_cpu, MODEL_CONVNET, 1);
    sgd = optim_create_on(&nn_cpu, &(optim_cfg){.kind = OPTIM_SGD, .momentum = 0.5f}, model_num_params(convnet));
    return 0;
}

static void load_net(void *path) { model_file_load(path, net); }
static void load_convnet(void *path) { model_file_load(path, convnet); }

/* The run's identity as the file states it (the names src/train/train.c gives), so that an intact checkpoint passes
 * the identity and checksum checks and the fuzzer reaches the paths past them. */
static void identity_of(const char *path, checkpoint_identity *id)
{
    static const char *const names[] = {
        "model",        "optimizer", "lr",        "gamma",         "momentum",           "weight_decay",
        "global_batch", "seed",      "precision", "train_samples", "train_source_sha256"};
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    for (size_t i = 0; f >= 0 && i < sizeof names / sizeof names[0]; i++) {
        char attr[64], *v;
        snprintf(attr, sizeof attr, "setting.%s", names[i]);
        if ((v = model_file_read_string_attr(f, attr)))
            checkpoint_identity_add(id, names[i], "%.*s", TS_VALUE_LEN - 1, v);
        free(v);
    }
    if (f >= 0)
        H5Fclose(f);
}

static void resume(void *path)
{
    checkpoint_config c = {.resume = path, .keep = 1, .timeout_s = 10};
    checkpoint_position pos;
    identity_of(path, &c.id);
    checkpoint_resume(&c, convnet, sgd, &pos);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("input.h5", data, size);
    fuzz_call(load_net, (void *)path);
    fuzz_call(load_convnet, (void *)path);
    fuzz_call(resume, (void *)path);
    return 0;
}
