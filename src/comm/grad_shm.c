#include "comm/grad_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/errors.h"
#include "base/threads.h"
#include "comm/stall.h"
#include "comm/world.h"

enum { MAX_BUCKETS = 256, CTL_BYTES = 4096, PART_ALIGN = 16, SUM_BLOCK = 1024 };

/* The first page of each rank's segment, written by that rank only:
 *   - ready[b]: the stamp of the last armed pass whose bucket b is final on this rank;
 *   - done: the last pass whose parts this rank has summed;
 *   - arrived[s % 2]: when this rank's backward ended in pass s (CLOCK_MONOTONIC, ns: one clock for the node's
 *     ranks). Two stamps: a peer that is done may start the next pass's wait while this rank still reads this
 *     one's; it cannot start the one after before this rank is done with the next. */
typedef struct {
    _Atomic uint64_t ready[MAX_BUCKETS];
    _Atomic uint64_t done, arrived[2];
} shm_ctl;

struct grad_shm {
    MPI_Comm comm;
    int world, rank;
    size_t n, bytes; /* floats of gradients; bytes of each segment (control page and gradients) */
    void **map;      /* every rank's segment, mapped here */
    shm_ctl **ctl;
    float **grad;
    double timeout_s, step_timeout_s;
    int armed;
    long step;
    uint64_t stamp; /* armed passes so far: this pass's mark */
    bucket_plan plan;
    size_t start[MAX_BUCKETS], count[MAX_BUCKETS];
    int nb, summed; /* buckets published by this rank, and of those the ones whose part it has summed */
    comm_stats stats;
};

_Static_assert(sizeof(shm_ctl) <= CTL_BYTES, "the control block fits its page");

/* Rank r's part of bucket b: [lo, hi), whole cache lines except at the bucket's end. */
static void part_of(const grad_shm *g, int b, int r, size_t *lo, size_t *hi)
{
    size_t count = g->count[b], chunk = (count + (size_t)g->world - 1) / (size_t)g->world;
    chunk = (chunk + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN;
    size_t a = (size_t)r * chunk, z = a + chunk;
    *lo = g->start[b] + (a < count ? a : count);
    *hi = g->start[b] + (z < count ? z : count);
}

/* Sums this rank's part of bucket b over the ranks, in rank order, into every rank's copy. */
static void sum_part(grad_shm *g, int b)
{
    size_t lo, hi;
    part_of(g, b, g->rank, &lo, &hi);
    float s[SUM_BLOCK];
    for (size_t i = lo; i < hi; i += SUM_BLOCK) {
        size_t m = hi - i < SUM_BLOCK ? hi - i : SUM_BLOCK;
        memcpy(s, g->grad[0] + i, m * sizeof *s);
        for (int q = 1; q < g->world; q++) {
            const float *x = g->grad[q] + i;
            SIMD /* each element's sum still in rank order */
            for (size_t j = 0; j < m; j++)
                s[j] += x[j];
        }
        for (int q = 0; q < g->world; q++)
            memcpy(g->grad[q] + i, s, m * sizeof *s);
    }
}

static int all_ready(const grad_shm *g, int b)
{
    for (int q = 0; q < g->world; q++)
        if (atomic_load_explicit(&g->ctl[q]->ready[b], memory_order_acquire) < g->stamp)
            return 0;
    return 1;
}

static int all_done(const grad_shm *g)
{
    for (int q = 0; q < g->world; q++)
        if (atomic_load_explicit(&g->ctl[q]->done, memory_order_acquire) < g->stamp)
            return 0;
    return 1;
}

/* Sums the parts of the buckets, in order, that every rank has published. */
static void sum_ready(grad_shm *g)
{
    while (g->summed < g->nb && all_ready(g, g->summed))
        sum_part(g, g->summed++);
}

static void publish(grad_shm *g, size_t start, size_t count)
{
    if (g->nb == MAX_BUCKETS)
        die(EX_SOFTWARE, "more than %d gradient buckets in one pass", MAX_BUCKETS);
    g->start[g->nb] = start;
    g->count[g->nb] = count;
    atomic_store_explicit(&g->ctl[g->rank]->ready[g->nb], g->stamp, memory_order_release);
    g->nb++;
    g->stats.launched++;
}

void grad_shm_arm(grad_shm *g, int armed, long step)
{
    g->armed = armed;
    g->step = step;
    if (armed) {
        g->stamp++;
        g->nb = g->summed = 0;
    }
}

void grad_shm_ready(void *ctx, size_t offset, size_t count)
{
    grad_shm *g = ctx;
    if (!g->armed)
        return;
    size_t start[2], counts[2];
    int k = bucket_ready(&g->plan, offset, count, start, counts);
    for (int i = 0; i < k; i++)
        publish(g, start[i], counts[i]);
    sum_ready(g);
}

void grad_shm_poll(void *ctx)
{
    grad_shm *g = ctx;
    if (g->armed)
        sum_ready(g);
}

/* The latest of the ranks' arrivals in this pass, once every rank is done (their stores precede done's). */
static double last_arrival(const grad_shm *g)
{
    uint64_t last = 0;
    for (int q = 0; q < g->world; q++) {
        uint64_t a = atomic_load_explicit(&g->ctl[q]->arrived[g->stamp % 2], memory_order_relaxed);
        last = a > last ? a : last;
    }
    return 1e-9 * (double)last;
}

/* Sums what is left, then waits until every rank has summed its parts, within the deadline; a peer that does
 * not get there is named (stall.h). Returns how long of that this rank waited for the last rank's backward
 * to end: time no exchange could hide. */
static double wait_all(grad_shm *g)
{
    const char *option, *what = "gradient all-reduce";
    double timeout = comm_wait_deadline(g->timeout_s, g->step_timeout_s, g->stats.reductions, &option);
    double start = clock_now();
    atomic_store_explicit(&g->ctl[g->rank]->arrived[g->stamp % 2], (uint64_t)(start * 1e9), memory_order_relaxed);
    int done = 0;
    stall_wait_begin(what, g->step);
    for (long spins = 1;; spins++) {
        sum_ready(g);
        if (!done && g->summed == g->nb) {
            atomic_store_explicit(&g->ctl[g->rank]->done, g->stamp, memory_order_release);
            done = 1;
        }
        if (done && all_done(g))
            break;
        if (spins % 1024 == 0) {
            double waited = clock_now() - start;
            if (waited > timeout || stall_poll()) {
                int bucket = g->summed < g->nb ? g->summed : g->nb - 1;
                stall_wait w = {what, g->step, bucket, g->nb, waited, timeout, option};
                stall_die(&w, NULL);
            }
            nanosleep(&(struct timespec){0, 20000}, NULL);
        } else if (spins % 16 == 0) {
            sched_yield(); /* oversubscribed ranks: let the one we wait for run */
        }
    }
    stall_wait_end();
    double late = last_arrival(g) - start;
    return late > 0 ? late : 0;
}

void grad_shm_finish(grad_shm *g)
{
    if (!g->armed)
        return;
    double t = clock_now();
    size_t start, count;
    if (bucket_flush(&g->plan, &start, &count))
        publish(g, start, count);
    double late = wait_all(g), exposed = clock_now() - t;
    g->stats.exposed_s += exposed;
    g->stats.skew_s += late < exposed ? late : exposed;
    g->stats.buckets = g->nb;
    g->stats.reductions++;
}

float *grad_shm_buffer(grad_shm *g) { return g->grad[g->rank]; }

comm_stats grad_shm_get_stats(const grad_shm *g)
{
    comm_stats s = g->stats;
    s.shm = 1;
    return s;
}

/* ---- The segments ---------------------------------------------------------------------------------- */

static void segment_name(char *name, size_t len, long tag, int rank)
{
    snprintf(name, len, "/mnist_ddp.%ld.%d", tag, rank);
}

/* Creates and maps this rank's segment, its pages reserved now (a full /dev/shm fails here, not with SIGBUS
 * later). Returns 0, or an errno value. */
static int create_own(grad_shm *g, const char *name)
{
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a killed job whose rank 0 had our pid */
        shm_unlink(name);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0)
        return errno;
    int err = ftruncate(fd, (off_t)g->bytes) ? errno : posix_fallocate(fd, 0, (off_t)g->bytes);
    void *p = err ? MAP_FAILED : mmap(NULL, g->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && p == MAP_FAILED)
        err = errno;
    close(fd);
    if (err)
        shm_unlink(name);
    else
        g->map[g->rank] = p;
    return err;
}

static int map_peer(grad_shm *g, const char *name, int q)
{
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0)
        return errno;
    void *p = mmap(NULL, g->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = p == MAP_FAILED ? errno : 0;
    close(fd);
    if (!err)
        g->map[q] = p;
    return err;
}

/* Whether every rank succeeded; else rank 0 says what the first failure was. Collective. */
static int agree(grad_shm *g, int err, const char *doing)
{
    int worst[2] = {err, err ? g->rank : -1}, all[2];
    world_allreduce_on(g->comm, worst, all, 2, MPI_INT, MPI_MAX);
    if (all[0] && g->rank == 0)
        warn("gradient all-reduce through shared memory: %s failed (%s, rank %d; %.1f MiB per rank in /dev/shm): "
             "MPI's all-reduce instead",
             doing, strerror(all[0]), all[1], (double)g->bytes / 1048576.0);
    return all[0] == 0;
}

static int map_all(grad_shm *g)
{
    long tag = (long)getpid() * 1000 + (long)(clock_now() * 1e3) % 1000;
    world_bcast_on(g->comm, &tag, 1, MPI_LONG, 0);
    char name[64];
    segment_name(name, sizeof name, tag, g->rank);
    int ok = agree(g, create_own(g, name), "creating a segment"), err = 0;
    for (int q = 0; q < g->world && ok && !err; q++) {
        char peer[64];
        segment_name(peer, sizeof peer, tag, q);
        if (q != g->rank)
            err = map_peer(g, peer, q);
    }
    ok = ok && agree(g, err, "mapping the peers' segments");
    if (g->map[g->rank]) /* every rank has mapped it or given up: nothing is left behind in /dev/shm */
        shm_unlink(name);
    return ok;
}

static void unmap_all(grad_shm *g)
{
    for (int q = 0; q < g->world; q++)
        if (g->map[q])
            munmap(g->map[q], g->bytes);
}

/* The isolated reference of the overlap figure: the whole buffer as one bucket, best of three, the maximum
 * over ranks. The gradients are zero: the sums leave them so. */
static void time_blocking(grad_shm *g)
{
    double best = 1e30;
    for (int i = 0; i < 3; i++) {
        world_barrier_on(g->comm);
        double t = clock_now();
        grad_shm_arm(g, 1, 0);
        publish(g, 0, g->n);
        wait_all(g);
        t = clock_now() - t;
        world_allreduce_on(g->comm, MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX);
        best = t < best ? t : best;
    }
    g->stats = (comm_stats){.blocking_s = best};
}

grad_shm *grad_shm_create(MPI_Comm comm, size_t n, size_t bucket_bytes, double timeout_s, double step_timeout_s)
{
    grad_shm *g = xcalloc(1, sizeof *g);
    g->comm = comm;
    MPI_CHECK(MPI_Comm_size(comm, &g->world));
    MPI_CHECK(MPI_Comm_rank(comm, &g->rank));
    g->n = n;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    g->bytes = CTL_BYTES + (n * sizeof(float) + page - 1) / page * page;
    g->map = xcalloc((size_t)g->world, sizeof *g->map);
    if (!map_all(g)) {
        grad_shm_free(g);
        return NULL;
    }
    g->ctl = xcalloc((size_t)g->world, sizeof *g->ctl);
    g->grad = xcalloc((size_t)g->world, sizeof *g->grad);
    for (int q = 0; q < g->world; q++) {
        g->ctl[q] = g->map[q];
        g->grad[q] = (float *)(void *)((char *)g->map[q] + CTL_BYTES);
    }
    g->timeout_s = timeout_s;
    g->step_timeout_s = step_timeout_s;
    bucket_init(&g->plan, n, bucket_bytes / sizeof(float));
    time_blocking(g);
    return g;
}

void grad_shm_free(grad_shm *g)
{
    if (!g)
        return;
    unmap_all(g);
    free(g->map);
    free(g->ctl);
    free(g->grad);
    free(g);
}
