/* The replicas of a run: how long their collectives may wait, and their agreement checked. Used by the
 * training loop (train.c) and its reports (train_report.c). */
#ifndef MNIST_REPLICAS_H
#define MNIST_REPLICAS_H
#include "train/train_run.h"

/* How long a collective of the training loop may wait now (start-up or steady state), and which option
 * says so. */
double wait_deadline(const run *r, const char **option);
/* narrow 1: the collectives of world.h wait as long as the training loop's (the ranks arrive at evaluation and
 * replica checks as together as at a step); 0: --comm-timeout again (a rank may write a file meanwhile). */
void narrow_deadline(const run *r, int narrow);
/* Collective: BatchNorm statistics are per rank (local batches); averaging them makes replicas identical
 * again; then every rank's parameters are compared (a difference stops the job). Leaves the parameters in
 * host_params; the time counts as evaluation. */
void sync_and_check(run *r, const char *when);
#endif
