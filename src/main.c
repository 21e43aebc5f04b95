/* mnist_ddp: data-parallel MNIST training. Bootstrap ranks, choose the device, train, report. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "bootstrap.h"
#include "errors.h"
#include "log.h"
#include "options.h"
#include "train.h"

/* The device this rank computes on; the GPU path is chosen only when built in and usable. */
static const char *choose_device(const options *o)
{
#ifndef HAVE_CUDA
    if (o->device == DEVICE_CUDA)
        die_all(EX_UNAVAILABLE, "--device cuda: this build has no GPU path (configure --with-cuda and rebuild), "
                "or run with --device cpu");
    if (o->device == DEVICE_AUTO)
        say("device auto: this build has no GPU path; training on the CPU");
#endif
    if (strcmp(o->precision, "fp32") != 0)
        die_all(EX_USAGE, "--precision %s: only the GPU path computes in reduced precision; the CPU uses fp32",
                o->precision);
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
    const char *device = choose_device(&o);
    int threads = bootstrap_threads(&env, o.threads);
    bootstrap_report(&env, device, threads);
    int rc = train_run(&o, &env);
    log_close();
    bootstrap_finalize(&env);
    return rc;
}
