/* mnist_ddp: data-parallel MNIST training. Bootstrap ranks, choose the device, train, report. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "bootstrap.h"
#include "errors.h"
#include "gpu.h"
#include "log.h"
#include "options.h"
#include "train.h"

/* The device this rank computes on. Device selection and NCCL exist (src/gpu.h); the device-resident
 * model does not yet, so a usable GPU is reported and the CPU trains. */
static const char *choose_device(const options *o, const ddp_env *env)
{
    if (strcmp(o->precision, "fp32") != 0)
        die_all(EX_USAGE, "--precision %s: only the GPU path computes in reduced precision; the CPU uses fp32",
                o->precision);
    if (o->device != DEVICE_CPU && gpu_decide(env, o->device == DEVICE_CUDA)) {
        if (o->device == DEVICE_CUDA)
            die_all(EX_UNAVAILABLE, "--device cuda: training on GPUs is not implemented in this version (device "
                    "selection and NCCL are, the CUDA model is not); use --device cpu");
        say("device auto: GPUs are present, but training on GPUs is not implemented in this version; "
            "training on the CPU");
    }
    return "cpu";
}

int main(int argc, char **argv)
{
    ddp_env env;
    options o;
    error_set_program("mnist_ddp");
    bootstrap_init(&argc, &argv, &env);
    options_parse(argc, argv, &o);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our own one-line messages instead of HDF5's stack dumps */
    log_init(env.rank, o.verbose, o.metrics);
    const char *device = choose_device(&o, &env);
    int threads = bootstrap_threads(&env, o.threads);
    bootstrap_report(&env, device, threads);
    int rc = train_run(&o, &env);
    log_close();
    bootstrap_finalize(&env);
    return rc;
}
