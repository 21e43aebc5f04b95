#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/bf16.h"
#include "base/clock.h"
#include "base/errors.h"
#include "comm/grad_shm.h"
#include "comm/progress.h"
#include "comm/stall.h"
#include "comm/world.h"

enum { MAX_BUCKETS = 256 };

struct grad_comm {
    MPI_Comm comm;
    int world;
    float *grads;
    size_t n;
    double timeout_s, step_timeout_s; /* start-up and steady-state deadlines (comm_wait_deadline) */
    int armed, alone;                 /* alone: one rank reduces anyway (comm_config's alone) */
    long step;
    bucket_plan plan;
    uint16_t *wire; /* --grad-comm bf16: the exchanged gradients (NULL: fp32 in place) */
    MPI_Request req[MAX_BUCKETS];
    int nreq;
    comm_stats stats;
    comm_progress *progress; /* NULL: MPI moves the buckets only inside this file's calls */
};

void comm_allreduce_within(double *v, int n, comm_op op, double timeout_s, const char *option, const char *what,
                           long step)
{
    static const MPI_Op ops[] = {[COMM_SUM] = MPI_SUM, [COMM_MIN] = MPI_MIN, [COMM_MAX] = MPI_MAX};
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, ops[op], MPI_COMM_WORLD, &req));
    stall_wait_all(&req, 1, 0, timeout_s, option, what, step);
}

/* MPI's user operation on bfloat16 (MPI has no such type): each sum in fp32, rounded once. Commutative. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = bf16_from_float(float_from_bf16(a[i]) + float_from_bf16(b[i]));
}

static MPI_Op bf16_sum_op(void)
{
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL)
        MPI_CHECK(MPI_Op_create(bf16_sum, 1, &op));
    return op;
}

/* Posts the all-reduce of gradients [start, start + count), in place or through the bf16 wire buffer. */
static void post(MPI_Comm comm, float *grads, uint16_t *wire, size_t start, size_t count, MPI_Request *req)
{
    if (!wire) {
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, grads + start, (int)count, MPI_FLOAT, MPI_SUM, comm, req));
        return;
    }
    for (size_t i = start; i < start + count; i++)
        wire[i] = bf16_from_float(grads[i]);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, wire + start, (int)count, MPI_UINT16_T, bf16_sum_op(), comm, req));
}

static void launch(grad_comm *g, size_t start, size_t count)
{
    if (g->nreq == MAX_BUCKETS)
        die(EX_SOFTWARE, "more than %d gradient buckets in flight", MAX_BUCKETS);
    post(g->comm, g->grads, g->wire, start, count, &g->req[g->nreq++]);
    g->stats.launched++;
}

/* Reference for the overlap figure: the best of three all-reduces of the whole buffer, posted and waited
 * for as the step posts its buckets (MPI_Iallreduce: the blocking MPI_Allreduce may take another algorithm),
 * each the maximum over ranks. */
static double time_blocking(MPI_Comm comm, size_t n, int bf16)
{
    float *scratch = xcalloc(n, sizeof *scratch);
    uint16_t *wire = bf16 ? xcalloc(n, sizeof *wire) : NULL;
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        world_barrier_on(comm);
        double t = clock_now();
        MPI_Request req;
        post(comm, scratch, wire, 0, n, &req);
        world_wait(&req, 1, "all-reduce timing");
        t = clock_now() - t;
        world_allreduce_on(comm, MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX);
        best = t < best ? t : best;
    }
    free(scratch);
    free(wire);
    return best;
}

grad_comm *grad_comm_create(MPI_Comm comm, float *grads, size_t n, size_t bucket_bytes, double timeout_s)
{
    grad_comm *g = xcalloc(1, sizeof *g);
    g->comm = comm;
    MPI_CHECK(MPI_Comm_size(comm, &g->world));
    g->grads = grads;
    g->n = n;
    g->timeout_s = g->step_timeout_s = timeout_s;
    bucket_init(&g->plan, n, bucket_bytes / sizeof(float));
    if (g->world > 1)
        g->stats.blocking_s = time_blocking(comm, n, 0);
    return g;
}

void grad_comm_set_wire_bf16(grad_comm *g)
{
    if (g->wire)
        return;
    g->wire = xcalloc(g->n ? g->n : 1, sizeof *g->wire);
    if (g->world > 1 || g->alone)
        g->stats.blocking_s = time_blocking(g->comm, g->n, 1);
}

void grad_comm_set_alone(grad_comm *g)
{
    g->alone = 1;
    g->stats.blocking_s = time_blocking(g->comm, g->n, g->wire != NULL);
}

void grad_comm_set_step_timeout(grad_comm *g, double step_timeout_s) { g->step_timeout_s = step_timeout_s; }

void grad_comm_arm(grad_comm *g, int armed, long step)
{
    g->armed = armed && (g->world > 1 || g->alone);
    g->step = step;
}

/* The progress thread's lock around this thread's MPI calls on the buckets (progress.h), when it runs. */
static void lock(grad_comm *g)
{
    if (g->progress)
        progress_lock(g->progress);
}

static void unlock(grad_comm *g)
{
    if (g->progress)
        progress_unlock(g->progress);
}

/* Drives Open MPI's progress engine on the buckets in flight: without an MPI call nothing moves. */
static void test_in_flight(grad_comm *g)
{
    int done;
    MPI_CHECK(MPI_Testall(g->nreq, g->req, &done, MPI_STATUSES_IGNORE));
}

void grad_comm_ready(void *ctx, size_t offset, size_t count)
{
    grad_comm *g = ctx;
    if (!g->armed)
        return;
    size_t start[2], counts[2];
    lock(g);
    int k = bucket_ready(&g->plan, offset, count, start, counts);
    for (int i = 0; i < k; i++)
        launch(g, start[i], counts[i]);
    if (g->nreq) {
        test_in_flight(g);
        if (g->progress && k)
            progress_watch(g->progress, g->req, &g->nreq);
    }
    unlock(g);
}

void grad_comm_poll(void *ctx)
{
    grad_comm *g = ctx;
    if (!g->armed || !g->nreq)
        return;
    lock(g);
    test_in_flight(g);
    unlock(g);
}

void grad_comm_finish(grad_comm *g)
{
    if (!g->armed)
        return;
    double t = clock_now();
    if (g->progress) { /* the thread stops before this thread's MPI calls (and the optimizer's) */
        progress_lock(g->progress);
        g->stats.early += progress_idle(g->progress);
        progress_unlock(g->progress);
    }
    size_t start, count;
    if (bucket_flush(&g->plan, &start, &count))
        launch(g, start, count);
    const char *option;
    double timeout = comm_wait_deadline(g->timeout_s, g->step_timeout_s, g->stats.reductions, &option);
    stall_wait_all(g->req, g->nreq, 1, timeout, option, "gradient all-reduce", g->step);
    for (size_t i = 0; g->wire && i < g->n; i++)
        g->grads[i] = float_from_bf16(g->wire[i]);
    g->stats.exposed_s += clock_now() - t;
    g->stats.buckets = g->nreq;
    g->stats.reductions++;
    g->nreq = 0;
}

comm_stats grad_comm_get_stats(const grad_comm *g)
{
    comm_stats s = g->stats;
    s.progress = g->progress != NULL;
    return s;
}

void grad_comm_set_progress(grad_comm *g, long interval_us)
{
    if (!g->progress && interval_us > 0 && (g->world > 1 || g->alone))
        g->progress = progress_start(interval_us);
}

int grad_comm_progressed(grad_comm *g)
{
    if (!g->progress)
        return 0;
    progress_lock(g->progress);
    int done = progress_done(g->progress);
    progress_unlock(g->progress);
    return done;
}

void grad_comm_free(grad_comm *g)
{
    if (g) {
        progress_stop(g->progress);
        free(g->wire);
    }
    free(g);
}

uint64_t buffer_fingerprint(const float *p, size_t n)
{
    /* FNV-1a over the 32-bit patterns: any flipped bit changes it. */
    uint64_t h = 0xcbf29ce484222325ULL;
    const uint32_t *w = (const uint32_t *)(const void *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001b3ULL;
    return h;
}

void comm_check_replicas(const float *p, size_t n, const char *when)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    int world, rank;
    MPI_CHECK(MPI_Comm_size(comm, &world));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (world == 1)
        return;
    uint64_t mine = buffer_fingerprint(p, n);
    uint64_t *all = xmalloc((size_t)world * sizeof *all);
    world_allgather_on(comm, &mine, all, sizeof mine);
    char list[512] = "";
    int bad = 0;
    for (int r = 1; r < world; r++)
        if (all[r] != all[0]) {
            size_t len = strlen(list);
            if (len < sizeof list - 16)
                snprintf(list + len, sizeof list - len, "%s%d", bad ? "," : "", r);
            bad++;
        }
    free(all);
    if (bad)
        die_all(EX_SOFTWARE,
                "replicas diverged %s: the parameters of rank%s %s differ from rank 0's "
                "(fingerprint mismatch); this is a bug or a hardware fault, please report it",
                when, bad > 1 ? "s" : "", list);
}

static void average_on(MPI_Comm comm, float *p, size_t n)
{
    int world;
    MPI_CHECK(MPI_Comm_size(comm, &world));
    if (world == 1 || n == 0)
        return;
    world_allreduce_on(comm, MPI_IN_PLACE, p, (int)n, MPI_FLOAT, MPI_SUM);
    for (size_t i = 0; i < n; i++)
        p[i] /= (float)world;
}

void comm_average(float *p, size_t n) { average_on(MPI_COMM_WORLD, p, n); }

/* ---- The comm_mpi table: MPI_COMM_WORLD, host buffers ------------------------------------------- */

/* One of the two gradient all-reduces: in shared memory (all ranks on one node, fp32) or through MPI. */
typedef struct {
    MPI_Comm comm;
    grad_shm *shm;
    grad_comm *mpi;
} mpi_state;

static grad_comm *mpi_grad_comm(const ddp_env *env, const comm_config *cfg, MPI_Comm comm, float *grads, size_t n)
{
    grad_comm *g = grad_comm_create(comm, grads, n, cfg->bucket_bytes, cfg->timeout_s);
    grad_comm_set_step_timeout(g, cfg->step_timeout_s);
    if (cfg->alone && g->world == 1)
        grad_comm_set_alone(g);
    if (cfg->wire_bf16)
        grad_comm_set_wire_bf16(g);
    /* Only between nodes: on one node the ranks' own cores move the bytes through shared memory, and the
     * thread's wake-ups only slow the step (docs/performance.md#the-all-reduces-progress-thread). */
    if (env->nodes < 2)
        return g;
    if (env->mpi_thread >= MPI_THREAD_SERIALIZED)
        grad_comm_set_progress(g, cfg->progress_us);
    else if (cfg->progress_us > 0 && world_rank() == 0)
        warn("--comm-progress: this MPI library does not support MPI_THREAD_SERIALIZED: no progress thread, the "
             "all-reduce moves at layer boundaries only");
    return g;
}

static void *mpi_create(const ddp_env *env, const comm_config *cfg, float *grads, size_t n)
{
    mpi_state *s = xcalloc(1, sizeof *s);
    /* A communicator of its own: a rank a step ahead or behind waits here while the others wait in another
     * collective, a stall the deadline names (stall.h), instead of matching their messages. */
    world_dup_on(MPI_COMM_WORLD, &s->comm);
    if (cfg->shm && env->nodes == 1 && env->world > 1 && !cfg->wire_bf16)
        s->shm = grad_shm_create(s->comm, n, cfg->bucket_bytes, cfg->timeout_s, cfg->step_timeout_s);
    if (!s->shm)
        s->mpi = mpi_grad_comm(env, cfg, s->comm, grads, n);
    return s;
}

static float *mpi_grads(void *state)
{
    mpi_state *s = state;
    return s->shm ? grad_shm_buffer(s->shm) : NULL;
}

static void mpi_arm(void *state, int armed, long step)
{
    mpi_state *s = state;
    if (s->shm)
        grad_shm_arm(s->shm, armed, step);
    else
        grad_comm_arm(s->mpi, armed, step);
}

static void mpi_ready(void *state, size_t offset, size_t count)
{
    mpi_state *s = state;
    if (s->shm)
        grad_shm_ready(s->shm, offset, count);
    else
        grad_comm_ready(s->mpi, offset, count);
}

static void mpi_poll(void *state)
{
    mpi_state *s = state;
    if (s->shm)
        grad_shm_poll(s->shm);
    else
        grad_comm_poll(s->mpi);
}

static void mpi_finish(void *state)
{
    mpi_state *s = state;
    if (s->shm)
        grad_shm_finish(s->shm);
    else
        grad_comm_finish(s->mpi);
}

static comm_stats mpi_stats(const void *state)
{
    const mpi_state *s = state;
    return s->shm ? grad_shm_get_stats(s->shm) : grad_comm_get_stats(s->mpi);
}

static void mpi_destroy(void *state)
{
    mpi_state *s = state;
    grad_shm_free(s->shm);
    grad_comm_free(s->mpi);
    MPI_CHECK(MPI_Comm_free(&s->comm));
    free(s);
}

static void mpi_broadcast(void *state, float *p, size_t n, const char *what)
{
    (void)what;
    world_bcast_on(((mpi_state *)state)->comm, p, (int)n, MPI_FLOAT, 0);
}

static void mpi_average(void *state, float *p, size_t n, const char *what)
{
    (void)what;
    average_on(((mpi_state *)state)->comm, p, n);
}

const comm_backend comm_mpi = {
    .name = "mpi",
    .create = mpi_create,
    .grads = mpi_grads,
    .arm = mpi_arm,
    .ready = mpi_ready,
    .poll = mpi_poll,
    .finish = mpi_finish,
    .stats = mpi_stats,
    .broadcast = mpi_broadcast,
    .average = mpi_average,
    .destroy = mpi_destroy,
};
