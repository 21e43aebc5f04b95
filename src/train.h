/* The training run: data, model, optimizer and collectives wired together for one job. */
#ifndef MNIST_TRAIN_H
#define MNIST_TRAIN_H
#include "bootstrap.h"
#include "options.h"

/* Returns the exit status (0). Fatal problems stop the job from inside with a clear line. */
int train_run(const options *o, const ddp_env *env);
#endif
