/* The training run: data, model, optimizer and collectives wired together for one job. */
#ifndef MNIST_TRAIN_H
#define MNIST_TRAIN_H
#include "bootstrap.h"
#include "options.h"

/* gpu: train on this rank's GPU (bound by gpu_select(), cuBLAS initialised), else on the CPU. Returns
 * the exit status (0). Fatal problems stop the job from inside with a clear line. */
int train_run(const options *o, const ddp_env *env, int gpu);
#endif
