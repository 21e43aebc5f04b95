#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "errors.h"

enum { MAX_BUCKETS = 256 };

struct grad_comm {
    MPI_Comm comm;
    int world;
    float *grads;
    size_t n, bucket_floats;
    double timeout_s;
    int armed;
    long step;
    size_t lo, hi;                 /* pending range, not yet started */
    MPI_Request req[MAX_BUCKETS];
    int nreq;
    grad_comm_stats stats;
};

/* Waits for requests, with a deadline, so a dead or stalled peer aborts the job instead of hanging it. */
static void wait_all(grad_comm *g, MPI_Request *req, int n, const char *what)
{
    double deadline = clock_now() + g->timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        MPI_CHECK(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
        if (done)
            return;
        if ((spins & 1023) == 1023) {
            if (clock_now() > deadline)
                die(EX_UNAVAILABLE, "%s at step %ld did not complete within --comm-timeout %.0f s: a peer rank "
                    "died, stalled or diverged in its step count", what, g->step, g->timeout_s);
            nanosleep(&(struct timespec){0, 20000}, NULL);
        }
    }
}

static void start_pending(grad_comm *g)
{
    if (g->hi == g->lo)
        return;
    if (g->nreq == MAX_BUCKETS)
        die(EX_SOFTWARE, "more than %d gradient buckets in flight", MAX_BUCKETS);
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, g->grads + g->lo, (int)(g->hi - g->lo), MPI_FLOAT, MPI_SUM, g->comm,
                             &g->req[g->nreq++]));
    g->hi = g->lo;
}

grad_comm *grad_comm_create(MPI_Comm comm, float *grads, size_t n, size_t bucket_bytes, double timeout_s)
{
    grad_comm *g = xcalloc(1, sizeof *g);
    g->comm = comm;
    MPI_CHECK(MPI_Comm_size(comm, &g->world));
    g->grads = grads;
    g->n = n;
    g->bucket_floats = bucket_bytes / sizeof(float);
    g->timeout_s = timeout_s;
    g->lo = g->hi = n;
    if (g->world > 1) {
        /* Reference for the overlap figure: the best of three blocking all-reduces of the whole buffer. */
        float *scratch = xcalloc(n, sizeof *scratch);
        g->stats.blocking_s = 1e30;
        for (int i = 0; i < 3; i++) {
            MPI_CHECK(MPI_Barrier(comm));
            double t = clock_now();
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, scratch, (int)n, MPI_FLOAT, MPI_SUM, comm));
            t = clock_now() - t;
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm));
            if (t < g->stats.blocking_s)
                g->stats.blocking_s = t;
        }
        free(scratch);
    }
    return g;
}

void grad_comm_arm(grad_comm *g, int armed, long step)
{
    g->armed = armed && g->world > 1;
    g->step = step;
}

void grad_comm_ready(void *ctx, size_t offset, size_t count)
{
    grad_comm *g = ctx;
    if (!g->armed)
        return;
    if (offset + count != g->lo) /* not adjacent to the pending range: start it, begin a new one */
        start_pending(g);
    if (g->hi == g->lo)
        g->hi = offset + count;
    g->lo = offset;
    if (g->hi - g->lo >= g->bucket_floats)
        start_pending(g);
    /* Drive Open MPI's progress engine between layers: without an MPI call nothing moves. */
    if (g->nreq) {
        int done;
        MPI_CHECK(MPI_Testall(g->nreq, g->req, &done, MPI_STATUSES_IGNORE));
    }
}

void grad_comm_finish(grad_comm *g)
{
    if (!g->armed)
        return;
    double t = clock_now();
    start_pending(g);
    wait_all(g, g->req, g->nreq, "gradient all-reduce");
    g->stats.exposed_s += clock_now() - t;
    g->stats.buckets = g->nreq;
    g->stats.reductions++;
    g->nreq = 0;
    g->lo = g->hi = g->n;
}

grad_comm_stats grad_comm_get_stats(const grad_comm *g) { return g->stats; }

void grad_comm_free(grad_comm *g) { free(g); }

uint64_t buffer_fingerprint(const float *p, size_t n)
{
    /* FNV-1a over the 32-bit patterns: any flipped bit changes it. */
    uint64_t h = 0xcbf29ce484222325ULL;
    const uint32_t *w = (const uint32_t *)(const void *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0x100000001b3ULL;
    return h;
}

void comm_check_replicas(MPI_Comm comm, const float *p, size_t n, const char *when)
{
    int world, rank;
    MPI_CHECK(MPI_Comm_size(comm, &world));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (world == 1)
        return;
    uint64_t mine = buffer_fingerprint(p, n);
    uint64_t *all = xmalloc((size_t)world * sizeof *all);
    MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm));
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
        die_all(EX_SOFTWARE, "replicas diverged %s: the parameters of rank%s %s differ from rank 0's "
                "(fingerprint mismatch); this is a bug or a hardware fault, please report it",
                when, bad > 1 ? "s" : "", list);
}

void comm_average(MPI_Comm comm, float *p, size_t n)
{
    int world;
    MPI_CHECK(MPI_Comm_size(comm, &world));
    if (world == 1 || n == 0)
        return;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, (int)n, MPI_FLOAT, MPI_SUM, comm));
    for (size_t i = 0; i < n; i++)
        p[i] /= (float)world;
}
