/* The training step replayed as one device graph (CUDA graphs on the GPU path, docs/gpu.md): the first
 * replayable step of a shape is captured instead of queued, and every later one of that shape launches
 * the graph. A graph freezes its kernels' arguments, so it replays only a step whose work depends on
 * nothing but its shape and device memory. The caller says which steps qualify: neither the last partial
 * batch nor gradient accumulation, and with the batch's sample ids copied into a fixed device buffer first.
 * The learning rate and dropout key go to device memory before each step where the backend can (backend.h's
 * step_scalars): then they are not part of the shape, and one graph serves the whole run.
 * A capture that fails on any rank is agreed over MPI before any rank launches: rank 0 prints one warning
 * with the first failing rank's reason, and the run goes on eagerly. */
#ifndef MNIST_STEP_GRAPH_H
#define MNIST_STEP_GRAPH_H
#include <stdint.h>

#include "nn/backend.h"
#include "comm/comm.h"

/* What the step passes by value to its kernels: a graph replays only the shape it was captured with. lr and
 * dropout_key count only on a backend without step_scalars. */
typedef struct {
    double lr;
    uint64_t dropout_key;
    uint64_t total; /* samples of the step over all ranks (1/total scales the loss gradient); a replayable
                     * step is a full batch on every rank, so this fixes each rank's too */
} step_shape;

typedef struct step_graph step_graph;

/* enabled 0 (--cuda-graph off) or a backend without graphs: every step is queued eagerly. timeout_s: the
 * deadline of the agreement (--comm-timeout). */
step_graph *step_graph_create(const nn_backend *be, const comm_backend *cb, void *comm, int enabled, double timeout_s);
/* Queues one optimizer step: shape's lr and dropout_key to the backend (step_scalars, where it has one), then
 * queue(ctx) (its device work only: nothing on the host that a replay would skip), or the graph of an earlier
 * step of the same shape. Collective (every rank passes the same replayable and shape). Captures only after an
 * eager step (cuBLAS workspaces, NCCL connections). */
void step_graph_step(step_graph *sg, const step_shape *shape, int replayable, long step, void (*queue)(void *ctx),
                     void *ctx);
/* Steps launched as a graph so far (the captured ones included). */
long step_graph_launches(const step_graph *sg);
long step_graph_captures(const step_graph *sg); /* graphs made (a new shape; without step_scalars, each epoch) */
void step_graph_free(step_graph *sg);
#endif
