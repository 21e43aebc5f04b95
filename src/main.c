/* mnist_ddp: data-parallel MNIST training. Bootstrap ranks, choose and set up the device, train, report. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "nn/cpu/blas_core.h"
#include "nn/cpu/gemm.h"
#include "comm/bootstrap.h"
#include "comm/cpu_fit.h"
#include "comm/lifeline.h"
#include "comm/preempt.h"
#include "comm/world.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "base/log.h"
#include "train/options.h"
#include "base/profile.h"
#include "train/train.h"

/* --profile with graphs calibrates node cost on a graph as long as net's step (35 nodes), replayed 200 times. */
enum { NODE_COST_NODES = 35, NODE_COST_REPLAYS = 200 };

/* 1: every rank trains on its GPU; 0: on the CPU (gpu_decide says why when a GPU was wanted). */
static int choose_device(const options *o, const ddp_env *env)
{
    int gpu = o->device != DEVICE_CPU && gpu_decide(env, o->device == DEVICE_CUDA);
    if (!gpu && strcmp(o->precision, "fp32") != 0)
        die_all(EX_USAGE, "--precision %s: only the GPU path computes in reduced precision; the CPU uses fp32",
                o->precision);
    return gpu;
}

static void report_blas(void)
{
    char blas[192];
    blas_core_describe(blas, sizeof blas);
    if (*blas)
        say("%s", blas);
    if (gemm_own_active())
        say("matrix products: mnist_ddp's own AVX-512 kernels for the large ones (fc1's; --gemm blas: BLAS's)");
}

int main(int argc, char **argv)
{
    ddp_env env;
    options o;
    error_set_program("mnist_ddp");
    int asked = options_info(argc, argv);
    if (asked) /* --help, --version */
        return options_print_info(asked, bootstrap_env_rank() <= 0);
    blas_core_fix(argv);
    if (options_checkpoints(argc, argv)) /* from the first moment: start-up (MPI, data) takes seconds */
        preempt_install();
    lifeline_start(options_checkpoints(argc, argv));
    /* A CUDA-aware MPI may create a GPU context inside MPI_Init: on this rank's GPU, not on GPU 0. */
    if (options_device(argc, argv) != DEVICE_CPU)
        gpu_choose_early();
    world_set_deadline(options_comm_timeout(argc, argv), "--comm-timeout");
    bootstrap_init(&argc, &argv, &env);
    options_parse(argc, argv, &o);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our own one-line messages instead of HDF5's stack dumps */
    int err = log_init(o.verbose, o.metrics);
    world_verdict(&err, sizeof err);
    if (err)
        die_all(EX_CANTCREAT, "--metrics %s: cannot create: %s", o.metrics, strerror(err));
    log_use_terminal(strcmp(env.launcher, "singleton") == 0);
    int gpu = choose_device(&o, &env);
    char device[GPU_MSG_LEN];
    gpu_info info;
    if (!gpu)
        train_cpu_backend(o.conv, o.gemm, device, sizeof device);
    else {
        gpu_select(&env, &info); /* stops the job when ranks of a node would share a GPU */
        gpu_describe(&info, device, sizeof device);
    }
    int threads = bootstrap_threads(&env, o.threads);
    bootstrap_report(&env, device, threads);
    cpu_fit_check(&env, threads);
    if (gpu) {
        gpu_report(&env, &info);
        gpu_blas_init(o.precision);
    } else {
        report_blas();
    }
    if (gpu && o.profile) { /* host clocks would time the queuing: a clock on the GPU's stream */
        profile_use_clock(gpu_profile_clock(o.cuda_graph));
        if (o.cuda_graph) /* what each stamp and each of the step's nodes costs by itself */
            say("profile: an empty kernel costs %.2f us a node in a replayed graph of %d (%d replays)",
                1e6 * gpu_node_cost_s(NODE_COST_NODES, NODE_COST_REPLAYS), NODE_COST_NODES, NODE_COST_REPLAYS);
    }
    int rc = train_run(&o, &env, gpu);
    if (gpu) {
        gpu_blas_free();
        gpu_profile_release();
        gpu_release();
    }
    log_close();
    bootstrap_finalize(&env);
    return rc;
}
