/* Single-process training throughput: zero gradients + forward + backward + optimizer step.
 *   bench_model [MODEL [BATCH [ITERATIONS [OPTIMIZER [CONV]]]]]   defaults: net 64 50 adadelta im2col
 * CONV: a --conv choice (nn_cpu_conv: im2col, onednn, winograd, wino43, auto). OpenBLAS and OpenMP are
 * held to one thread (one MPI rank per core is the deployment); prints images/s. */
#include <config.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/cpu/blas_core.h"
#include "base/errors.h"
#include "nn/model.h"
#include "nn/cpu/conv_choice.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/optim.h"
#include "base/rng.h"
#include "base/threads.h"

static double now(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    error_set_program("bench_model");
    blas_core_fix(argv); /* the kernels mnist_ddp runs */
    const char *name = argc > 1 ? argv[1] : "net";
    int batch = argc > 2 ? atoi(argv[2]) : 64, iters = argc > 3 ? atoi(argv[3]) : 50;
    int sgd = argc > 4 && strcmp(argv[4], "sgd") == 0;
    const char *conv = argc > 5 ? argv[5] : "im2col";
    const nn_backend *be = nn_cpu_conv(conv);
    openblas_set_num_threads(1);
    omp_set_num_threads(1);
    model *m = be ? model_create_on(be, model_kind_of(name), batch > 0 ? batch : 1) : NULL;
    if (!m || batch < 1 || iters < 1)
        die(EX_USAGE, "usage: bench_model [net|convnet [BATCH [ITERATIONS [adadelta|sgd"
                      " [im2col|onednn|winograd|wino43|auto]]]]] (onednn, winograd, wino43: where built with oneDNN)");
    size_t np = model_num_params(m), npix = (size_t)batch * 784;
    uint8_t *images = malloc(npix), *labels = malloc((size_t)batch);
    uint64_t *ids = malloc((size_t)batch * sizeof *ids);
    float *x = malloc(npix * sizeof *x);
    for (size_t i = 0; i < npix; i++)
        images[i] = (uint8_t)rng_below(1, i, 256);
    for (int i = 0; i < batch; i++) {
        labels[i] = (uint8_t)rng_below(2, (uint64_t)i, 10);
        ids[i] = (uint64_t)i;
    }
    cpu_normalize(images, npix, x);
    optim_cfg cfg =
        sgd ? (optim_cfg){OPTIM_SGD, 0.0f, 0.0f, 0.9f, 0.0f} : (optim_cfg){OPTIM_ADADELTA, 0.9f, 1e-6f, 0, 0};
    optim *o = optim_create_on(&nn_cpu, &cfg, np);
    /* Wall time is what a dedicated core gives; on a busy machine, where other processes take turns
     * on the core, this thread's CPU time (mean, and the best iteration) shows the same. */
    double wall = 0, cpu = 0, best = 1e30;
    for (int it = -3; it < iters; it++) { /* 3 warm-up iterations */
        double t = now(CLOCK_MONOTONIC), c = now(CLOCK_THREAD_CPUTIME_ID);
        memset(model_grads(m), 0, np * sizeof(float));
        model_forward_backward(m, x, labels, ids, batch, (uint64_t)it, 1.0f / (float)batch);
        optim_step(o, model_params(m), model_grads(m), sgd ? 0.01f : 1.0f);
        t = now(CLOCK_MONOTONIC) - t;
        c = now(CLOCK_THREAD_CPUTIME_ID) - c;
        if (it >= 0) {
            wall += t;
            cpu += c;
            best = c < best ? c : best;
        }
    }
    printf("%s, %s, batch %d, %s, 1 thread, %d iterations: %.0f images/s (per CPU second: mean %.0f, best "
           "iteration %.0f)\n",
           name, conv, batch, sgd ? "sgd" : "adadelta", iters, batch * iters / wall, batch * iters / cpu, batch / best);
    optim_free(o);
    model_free(m);
    free(images), free(labels), free(ids), free(x);
    return 0;
}
