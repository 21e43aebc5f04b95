#define _POSIX_C_SOURCE 200809L
#include "comm/stall.h"

#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

enum { TAG = 7, HOST = 64, NAMED = 4 /* more culprits than this are named by host, without pids */ };

typedef struct {
    char host[HOST];
    int32_t pid;
} peer;

/* What a rank sends at a missed deadline: where it waits. */
typedef struct {
    int64_t step;
    double waited_s, deadline_s;
    int32_t bucket, buckets, expired;
    char what[64], option[24];
} stall_rec;

static MPI_Comm comm = MPI_COMM_NULL;
static int me, world = 1;
static peer *peers;

/* Read by the SIGUSR2 handler: a pointer and a double, each written in one aligned store. */
static const char *volatile phase = "starting";
static volatile long phase_step;
static volatile int phase_waiting; /* phase is a collective this rank waits in */
static volatile double phase_since;
static const char *saved_phase;
static double saved_since;
static char dump_prefix[HOST + 96];
static int freeze_rank = -1; /* MNIST_DDP_FREEZE's rank and phase (stall.h) */
static char freeze_phase[32];

/* ---- The live dump: async-signal-safe formatting (no stdio in a handler) ---------------------------- */

static void put(char *b, size_t *n, size_t cap, const char *s)
{
    while (*s && *n + 1 < cap)
        b[(*n)++] = *s++;
}

static void put_long(char *b, size_t *n, size_t cap, long v)
{
    char d[24];
    int i = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do
        d[i++] = (char)('0' + u % 10);
    while ((u /= 10) && i < 23);
    if (v < 0)
        d[i++] = '-';
    while (i > 0 && *n + 1 < cap)
        b[(*n)++] = d[--i];
}

static void on_dump(int sig)
{
    (void)sig;
    int saved_errno = errno;
    char b[512];
    size_t n = 0;
    long ms = (long)((clock_now() - phase_since) * 1000);
    put(b, &n, sizeof b, dump_prefix);
    put(b, &n, sizeof b, "step ");
    put_long(b, &n, sizeof b, phase_step);
    put(b, &n, sizeof b, phase_waiting ? ", waiting in " : ", ");
    put(b, &n, sizeof b, phase);
    put(b, &n, sizeof b, " for ");
    put_long(b, &n, sizeof b, ms / 1000);
    put(b, &n, sizeof b, ms % 1000 < 100 ? (ms % 1000 < 10 ? ".00" : ".0") : ".");
    put_long(b, &n, sizeof b, ms % 1000);
    put(b, &n, sizeof b, " s\n");
    ssize_t w = write(STDERR_FILENO, b, n);
    (void)w;
    errno = saved_errno;
}

/* MNIST_DDP_FREEZE=RANK:PHASE: read once; a malformed value stops every rank alike. */
static void freeze_setup(void)
{
    const char *v = getenv("MNIST_DDP_FREEZE");
    int n = 0;
    if (!v)
        return;
    if (sscanf(v, "%d:%n", &freeze_rank, &n) != 1 || n == 0 || freeze_rank < 0 || !v[n] ||
        strlen(v + n) >= sizeof freeze_phase)
        die_all(EX_CONFIG, "environment variable MNIST_DDP_FREEZE='%s': RANK:PHASE expected (a test setting)", v);
    snprintf(freeze_phase, sizeof freeze_phase, "%s", v + n);
}

/* The test's fault: this rank stops (SIGSTOP) as it enters the phase, as a rank frozen by its node would. */
static void freeze_here(const char *what)
{
    if (me != freeze_rank || strcmp(what, freeze_phase) != 0)
        return;
    freeze_rank = -1;
    fprintf(stderr, "mnist_ddp: test: rank %d frozen in %s (MNIST_DDP_FREEZE)\n", me, what);
    fflush(stderr);
    raise(SIGSTOP);
}

void stall_init(const char *host, double timeout_s, const char *option)
{
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    /* A communicator of its own: a notice never matches another collective's message. */
    MPI_Request req;
    MPI_Comm dup; /* not comm until complete: stall_poll probes comm while the wait runs */
    MPI_CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req));
    stall_wait_all(&req, 1, 0, timeout_s, option, "starting", 0);
    MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    comm = dup;
    peer mine = {.pid = (int32_t)getpid()};
    snprintf(mine.host, sizeof mine.host, "%s", host);
    peers = xmalloc((size_t)world * sizeof *peers);
    MPI_CHECK(MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, peers, sizeof mine, MPI_BYTE, comm, &req));
    stall_wait_all(&req, 1, 0, timeout_s, option, "starting", 0);
    snprintf(dump_prefix, sizeof dump_prefix, "mnist_ddp: status: rank %d/%d on %s (pid %d): ", me, world, mine.host,
             (int)mine.pid);
    phase_since = clock_now();
    struct sigaction sa = {.sa_handler = on_dump, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        die(EX_OSERR, "cannot install the handler of SIGUSR2 (the live status line)");
    freeze_setup();
    stall_phase("starting", 0);
}

void stall_finalize(void)
{
    signal(SIGUSR2, SIG_IGN); /* a late status request must not end a finishing process */
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    free(peers);
    peers = NULL;
}

void stall_phase(const char *what, long step)
{
    phase_step = step;
    phase_since = clock_now();
    phase = what;
    freeze_here(what);
}

const char *stall_phase_now(long *step)
{
    *step = phase_step;
    return phase;
}

void stall_wait_begin(const char *what, long step)
{
    saved_phase = phase;
    saved_since = phase_since;
    phase_step = step;
    phase_since = clock_now();
    phase = what;
    phase_waiting = 1;
}

void stall_wait_end(void)
{
    phase_waiting = 0;
    phase = saved_phase;
    phase_since = saved_since;
}

int stall_poll(void)
{
    int flag = 0;
    if (comm != MPI_COMM_NULL && world > 1)
        MPI_Iprobe(MPI_ANY_SOURCE, TAG, comm, &flag, MPI_STATUS_IGNORE); /* an error: no notice */
    return flag;
}

/* The first of n requests not complete: the bucket a gradient wait is stuck on. */
static int first_open(MPI_Request *req, int n)
{
    for (int i = 0; i < n; i++) {
        int done = 0;
        if (MPI_Test(&req[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
            return i;
    }
    return n - 1;
}

void stall_wait_all(MPI_Request *req, int n, int bucketed, double timeout_s, const char *option, const char *what,
                    long step)
{
    double start = clock_now();
    stall_wait_begin(what, step);
    for (long spins = 0;; spins++) {
        int done = 0;
        MPI_CHECK(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
        if (done)
            break;
        if ((spins & 1023) == 1023) {
            double waited = clock_now() - start;
            if (waited > timeout_s || stall_poll()) {
                stall_wait w = {what, step, bucketed ? first_open(req, n) : -1, n, waited, timeout_s, option};
                stall_die(&w, NULL);
            }
            nanosleep(&(struct timespec){0, 20000}, NULL);
        }
    }
    stall_wait_end();
}

/* ---- The exchange at a missed deadline ------------------------------------------------------------- */

/* Every live rank sends its record to every other and collects theirs for at most STALL_WINDOW_S; a frozen
 * or dead rank's record never comes. Errors (a peer that is gone) count as no answer. */
static void exchange(const stall_rec *mine, stall_rec *got, int *answered)
{
    MPI_Request *rq = xmalloc(2 * (size_t)world * sizeof *rq), *sq = rq + world;
    int left = 0;
    for (int r = 0; r < world; r++) {
        rq[r] = sq[r] = MPI_REQUEST_NULL;
        if (r == me || MPI_Irecv(&got[r], sizeof *got, MPI_BYTE, r, TAG, comm, &rq[r]) != MPI_SUCCESS)
            continue;
        left++;
    }
    for (int r = 0; r < world; r++)
        if (r != me)
            MPI_Isend(mine, sizeof *mine, MPI_BYTE, r, TAG, comm, &sq[r]);
    double end = clock_now() + STALL_WINDOW_S;
    while (left > 0 && clock_now() < end) {
        for (int r = 0; r < world; r++) {
            int done = 0;
            if (rq[r] == MPI_REQUEST_NULL)
                continue;
            if (MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                rq[r] = MPI_REQUEST_NULL, left--;
            } else if (done) {
                answered[r] = 1, left--;
            }
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    /* The requests still open die with the job (MPI_Abort); freeing them could wait on a dead peer. */
}

/* Ranks in sel (0/1 per rank) as "rank 3" or "ranks 0,2-5", appended to out. */
static void put_ranks(char *out, size_t len, const int *sel, const char *host)
{
    int count = 0;
    for (int r = 0; r < world; r++)
        count += sel[r] && (!host || !strcmp(peers[r].host, host));
    size_t n = strlen(out);
    snprintf(out + n, len - n, "%s", count == 1 ? "rank " : "ranks ");
    for (int r = 0, first = 1; r < world; r++) {
        if (!sel[r] || (host && strcmp(peers[r].host, host)))
            continue;
        int end = r;
        while (end + 1 < world && sel[end + 1] && (!host || !strcmp(peers[end + 1].host, host)))
            end++;
        n = strlen(out);
        if (end == r)
            snprintf(out + n, len - n, "%s%d", first ? "" : ",", r);
        else
            snprintf(out + n, len - n, "%s%d-%d", first ? "" : ",", r, end);
        first = 0;
        r = end;
    }
}

/* Ranks in sel with where they run: "rank 1 (vm, pid 42)", or by host when many: "ranks 4-7 on n03, 9 on n05". */
static void put_culprits(char *out, size_t len, const int *sel)
{
    int count = 0;
    for (int r = 0; r < world; r++)
        count += sel[r];
    for (int r = 0, first = 1; r < world; r++) {
        size_t n = strlen(out);
        if (!sel[r])
            continue;
        if (count <= NAMED) {
            snprintf(out + n, len - n, "%s%d (%s, pid %d)", first ? (count == 1 ? "rank " : "ranks ") : ", ", r,
                     peers[r].host, (int)peers[r].pid);
        } else {
            int seen = 0; /* each host once, where its first culprit comes */
            for (int q = 0; q < r && !seen; q++)
                seen = sel[q] && !strcmp(peers[q].host, peers[r].host);
            if (seen)
                continue;
            char one[256] = "";
            put_ranks(one, sizeof one, sel, peers[r].host);
            snprintf(out + n, len - n, "%s%s on %s", first ? "" : ", ", first ? one : one + strcspn(one, " ") + 1,
                     peers[r].host);
        }
        first = 0;
    }
}

static int same_place(const stall_rec *a, const stall_rec *b)
{
    return a->step == b->step && !strcmp(a->what, b->what);
}

static void put_text(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put_text(char *out, size_t len, const char *fmt, ...)
{
    size_t n = strlen(out);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + n, len - n, fmt, ap);
    va_end(ap);
}

/* Answered ranks grouped by where they wait: group[r] is the lowest rank in r's place; returns the largest
 * group's (the lowest on a tie) and sets *groups. */
static int group_places(const stall_rec *got, const int *answered, int *group, int *groups)
{
    int best = -1, best_n = 0;
    *groups = 0;
    for (int r = 0; r < world; r++) {
        group[r] = -1;
        for (int q = 0; q <= r && answered[r] && group[r] < 0; q++)
            if (answered[q] && same_place(&got[q], &got[r]))
                group[r] = q;
    }
    for (int g = 0; g < world; g++) {
        if (group[g] != g)
            continue;
        int n = 0;
        for (int r = 0; r < world; r++)
            n += group[r] == g;
        (*groups)++;
        if (n > best_n)
            best = g, best_n = n;
    }
    return best;
}

/* The line: the deadline that passed first, who did not answer, where the others were. */
static void describe(const stall_rec *got, const int *answered, char *out, size_t len)
{
    const stall_rec *h = NULL;
    for (int r = 0; r < world && !h; r++)
        if (answered[r] && got[r].expired)
            h = &got[r];
    h = h ? h : &got[me];
    snprintf(out, len, "%s at step %lld did not complete within %s %g s: ", h->what, (long long)h->step, h->option,
             h->deadline_s);
    if (comm == MPI_COMM_NULL || world < 2) { /* no exchange (a harness without bootstrap_init) */
        put_text(out, len, "a peer rank died, stalled or diverged in its step count");
        return;
    }
    int *sel = xcalloc((size_t)world, sizeof *sel), *group = xcalloc((size_t)world, sizeof *group);
    int missing = 0, groups;
    for (int r = 0; r < world; r++)
        missing += sel[r] = !answered[r];
    if (missing) {
        put_culprits(out, len, sel);
        put_text(out, len, " did not answer (frozen, dead, or busy outside mnist_ddp's collectives); ");
    }
    int best = group_places(got, answered, group, &groups);
    if (groups > 1) {
        put_text(out, len, "ranks diverged: ");
        for (int g = 0; g < world; g++) {
            if (group[g] != g || g == best)
                continue;
            for (int r = 0; r < world; r++)
                sel[r] = group[r] == g;
            put_culprits(out, len, sel);
            put_text(out, len, " in %s at step %lld, ", got[g].what, (long long)got[g].step);
        }
        put_text(out, len, "while ");
    }
    int n = 0;
    for (int r = 0; r < world; r++)
        n += sel[r] = group[r] == best;
    put_ranks(out, len, sel, NULL);
    put_text(out, len, " %s waiting in %s at step %lld", n == 1 ? "was" : "were", got[best].what,
             (long long)got[best].step);
    if (got[best].bucket >= 0)
        put_text(out, len, ", bucket %d of %d", got[best].bucket + 1, got[best].buckets);
    if (!missing && groups == 1)
        put_text(out, len, ": every rank answered, so the collective itself did not progress (the network?)");
    free(sel);
    free(group);
}

void stall_die_at(const char *file, int line, const stall_wait *w, const char *suffix)
{
    stall_rec mine = {.step = w->step,
                      .waited_s = w->waited_s,
                      .deadline_s = w->deadline_s,
                      .bucket = w->bucket,
                      .buckets = w->buckets,
                      .expired = w->waited_s >= w->deadline_s};
    snprintf(mine.what, sizeof mine.what, "%s", w->what);
    snprintf(mine.option, sizeof mine.option, "%s", w->option);
    stall_rec *got = xcalloc((size_t)world, sizeof *got);
    int *answered = xcalloc((size_t)world, sizeof *answered);
    if (comm != MPI_COMM_NULL && world > 1)
        exchange(&mine, got, answered);
    got[me] = mine;
    answered[me] = 1;
    char msg[800];
    describe(got, answered, msg, sizeof msg);
    int speaker = 0;
    while (!answered[speaker])
        speaker++;
    /* One line for the job: the lowest rank that answered speaks, and its MPI_Abort ends the others while
     * they wait here. Should it not reach them (a partition), each says it after the wait and ends within
     * ABORT_GRACE_S: the whole job ends within the deadline + 15 s. */
    if (speaker != me)
        clock_sleep(STALL_WINDOW_S + 1);
    die_at(file, line, EX_UNAVAILABLE, "%s%s%s", msg, suffix ? "; " : "", suffix ? suffix : "");
}
