/* The training run: data, model, optimizer and collectives wired together for one job. */
#ifndef MNIST_TRAIN_H
#define MNIST_TRAIN_H
#include <stddef.h>

#include "nn/backend.h"
#include "comm/bootstrap.h"
#include "train/options.h"

/* gpu: train on this rank's GPU (bound by gpu_select(), cuBLAS initialised), else on the CPU. Returns
 * the exit status (0). Fatal problems stop the job from inside with a clear line. */
int train_run(const options *o, const ddp_env *env, int gpu);
/* The CPU backend --conv names (nn_cpu_conv), with --gemm's products (0 auto, 1 blas), and its description
 * for the start-up table in desc (may be NULL). --conv onednn or winograd in a build without oneDNN stops the
 * job (69). */
const nn_backend *train_cpu_backend(const char *conv, int gemm, char *desc, size_t len);
#endif
