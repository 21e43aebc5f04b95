#include "train/step_graph.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/errors.h"
#include "base/log.h"
#include "comm/world.h"

struct step_graph {
    const nn_backend *be;
    const comm_backend *cb;
    void *comm;
    int enabled; /* 0 after a failed capture: the rest of the run is eager */
    int warm;    /* an eager step has run */
    void *graph; /* of shape */
    step_shape shape;
    double timeout_s;
    long launches, captures;
};

step_graph *step_graph_create(const nn_backend *be, const comm_backend *cb, void *comm, int enabled, double timeout_s)
{
    step_graph *sg = xcalloc(1, sizeof *sg);
    *sg = (step_graph){.be = be, .cb = cb, .comm = comm, .enabled = enabled && be->graph_begin, .timeout_s = timeout_s};
    return sg;
}

/* lr and the dropout key freeze in a graph only where the backend cannot write them to its memory first. */
static int same_shape(const nn_backend *be, const step_shape *a, const step_shape *b)
{
    return (be->step_scalars || (a->lr == b->lr && a->dropout_key == b->dropout_key)) && a->total == b->total;
}

/* Every rank's capture verdict: 1 when all succeeded; else rank 0 prints the first failing rank's reason. */
static int agree(const step_graph *sg, int ok, const char *why, long step)
{
    int rank, world;
    rank = world_rank();
    world = world_size();
    double first_bad = ok ? world : rank;
    comm_allreduce_within(&first_bad, 1, COMM_MIN, sg->timeout_s, "--comm-timeout",
                          "agreeing on the CUDA graph capture", step);
    if (first_bad >= world)
        return 1;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", why);
    /* every rank is here: no deadline */
    world_bcast(msg, sizeof msg, (int)first_bad);
    if (rank == 0) /* one line for the job: every rank takes the same decision */
        warn("rank %d could not capture the training step as a CUDA graph (%s): every step runs eagerly "
             "(--cuda-graph off skips the attempt)",
             (int)first_bad, msg);
    return 0;
}

/* Captures queue(ctx) as the graph of shape; 0 (graphs off from now on) when any rank failed. Nothing
 * captured has run. */
static int capture(step_graph *sg, const step_shape *shape, long step, void (*queue)(void *), void *ctx)
{
    sg->be->graph_free(sg->graph);
    sg->graph = NULL;
    char why[256] = "";
    int ok = sg->be->graph_begin(why, sizeof why) == 0;
    if (ok) {
        queue(ctx);
        sg->graph = sg->be->graph_end(why, sizeof why);
        ok = sg->graph != NULL;
    }
    if (!agree(sg, ok, why, step)) {
        sg->be->graph_free(sg->graph);
        sg->graph = NULL;
        sg->enabled = 0;
        return 0;
    }
    sg->shape = *shape;
    sg->captures++;
    return 1;
}

void step_graph_step(step_graph *sg, const step_shape *shape, int replayable, long step, void (*queue)(void *ctx),
                     void *ctx)
{
    /* Outside any capture, before the step's work: eager or replayed, the step reads this pair. The float is the
     * one the optimizer is passed (train.c's queue_step). */
    if (sg->be->step_scalars)
        sg->be->step_scalars((float)shape->lr, shape->dropout_key);
    if (!sg->enabled || !replayable || !sg->warm ||
        ((!sg->graph || !same_shape(sg->be, &sg->shape, shape)) && !capture(sg, shape, step, queue, ctx))) {
        queue(ctx);
        sg->warm = 1;
        return;
    }
    sg->be->graph_launch(sg->graph);
    sg->launches++;
    if (sg->cb->replayed)
        sg->cb->replayed(sg->comm, step);
}

long step_graph_launches(const step_graph *sg) { return sg->launches; }
long step_graph_captures(const step_graph *sg) { return sg->captures; }

void step_graph_free(step_graph *sg)
{
    if (!sg)
        return;
    if (sg->graph)
        sg->be->graph_free(sg->graph);
    free(sg);
}
