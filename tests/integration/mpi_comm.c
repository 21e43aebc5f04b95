/* The CPU collectives of src/comm/comm_mpi.c on 2 or more ranks (tests/run-test: mpirun, CK_FORK=no):
 * - comm_average averages, not sums (exactly, for values chosen so);
 * - the bucketed gradient all-reduce sums rank-dependent gradients for bucket sizes 0, small, the whole
 *   buffer and more, with ranges back to front and out of order; the bucket count follows the rule (a
 *   bucket starts once it holds bucket_bytes, and a range not adjacent to the pending one starts it);
 *   an unarmed pass does not communicate, and only armed passes count as reductions; the same with the
 *   progress thread, which completes buckets while the caller makes no MPI call;
 * - buffer_fingerprint: equal buffers agree, any one-bit flip and any swap of two different elements
 *   change it, in a model-sized buffer too (a flip among its last elements); comm_check_replicas lets
 *   identical replicas through;
 * - --grad-comm bf16: the rounding (ties to even, overflow, NaN), the bucketed exchange exact where bf16 holds
 *   the values, each addition rounded where it does not, the same bits on every rank;
 * - started by bootstrap_init, as mnist_ddp is: Open MPI's nonblocking all-reduce runs Rabenseifner's
 *   algorithm, or the one the environment chose before (read back from the library through MPI_T;
 *   train-launch.sh runs this suite with a choice preset).
 * - world.c's collectives: operation, type, root and order each told apart; a duplicate returns errors.
 * Every rank makes the same collective calls before it checks anything, so a failed check on one rank
 * cannot leave the others waiting. The failures that end the job are in tests/comm-failures.sh. */
#include "../check_run.h"
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/bf16.h"
#include "base/errors.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "comm/world.h"

static int rank, world;
static int nbc_expected = 3; /* libnbc's iallreduce algorithm: bootstrap's Rabenseifner, or the preset one */

/* Layers of a toy model in memory order; backward reports them back to front. */
static const size_t sizes[] = {5, 3, 8, 2, 6, 4};
enum { NL = sizeof sizes / sizeof *sizes, N = 28, STEPS = 3 };
static const int back_to_front[NL] = {5, 4, 3, 2, 1, 0};
/* Layer 2 before 4 and 3, layer 0 before 1: every other range misses the pending one. */
static const int shuffled[NL] = {5, 2, 4, 3, 0, 1};

/* A generous deadline: a bug shows as an abort with 69, never as a hang. */
static const double TIMEOUT_S = 60;

static size_t offset_of(int layer)
{
    size_t o = 0;
    for (int t = 0; t < layer; t++)
        o += sizes[t];
    return o;
}

/* Rank-dependent and exact in float: the sum over ranks is (1 + .. + world) times the rank-free part. */
static float grad_value(int r, size_t i, int step)
{
    return (float)(r + 1) * (float)((i + 3 * (size_t)step) % 7 + 1) * 0.25f;
}

static float grad_sum(size_t i, int step)
{
    return (float)((i + 3 * (size_t)step) % 7 + 1) * 0.25f * (float)(world * (world + 1) / 2);
}

/* One backward pass: each layer's gradients are written just before they are reported final; the rest
 * is NaN until then, so a bucket started over gradients not yet final would reduce the poison. */
static void backward(grad_comm *g, float *grads, const int *order, int step)
{
    for (size_t i = 0; i < N; i++)
        grads[i] = NAN;
    for (int k = 0; k < NL; k++) {
        size_t o = offset_of(order[k]), n = sizes[order[k]];
        for (size_t i = o; i < o + n; i++)
            grads[i] = grad_value(rank, i, step);
        grad_comm_ready(g, o, n);
    }
}

/* Of the first n gradients, those that differ from the sum over ranks (reduce = 1) or from this rank's own
 * (reduce = 0). */
static size_t count_wrong(const float *grads, size_t n, int step, int reduce, size_t *first)
{
    size_t bad = 0;
    for (size_t i = n; i-- > 0;)
        if (grads[i] != (reduce ? grad_sum(i, step) : grad_value(rank, i, step))) {
            *first = i;
            bad++;
        }
    return bad;
}

typedef struct {
    const char *name;
    size_t bucket_floats;
    const int *order;
    int buckets; /* what the rule gives, worked out by hand below */
} bucket_case;

static const bucket_case cases[] = {
    /* Size 0: every range is a bucket of its own. */
    {"bucket 0, back to front", 0, back_to_front, 6},
    /* 4 floats: [24,28) fills one exactly (>=, not >), [18,24), then [8,18) with layer 3, [0,8) with
     * layer 1. */
    {"bucket 4 floats, back to front", 4, back_to_front, 4},
    /* 8 floats: [18,28), [8,18), [0,8). */
    {"bucket 8 floats, back to front", 8, back_to_front, 3},
    /* Exactly the buffer, and more: one bucket. */
    {"bucket = buffer, back to front", N, back_to_front, 1},
    {"bucket > buffer, back to front", 4 * N, back_to_front, 1},
    /* The range misses the pending one at layers 2, 4, 0 and 1 (3 joins 4): [24,28), [8,16), [16,24),
     * [0,5) are started by the next range, [5,8) by grad_comm_finish. */
    {"bucket > buffer, out of order", 4 * N, shuffled, 5},
    {"bucket 0, out of order", 0, shuffled, 6},
};
enum { NCASES = sizeof cases / sizeof *cases };

/* Cases NCASES on: the same with the progress thread testing every 20 us, interleaving with the hooks. */
START_TEST(test_grad_buckets)
{
    const bucket_case *c = &cases[_i % NCASES];
    float grads[N];
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, N, c->bucket_floats * sizeof(float), TIMEOUT_S);
    if (_i >= NCASES)
        grad_comm_set_progress(g, 20);
    size_t wrong[STEPS];
    size_t first[STEPS] = {0};
    for (int step = 0; step < STEPS; step++) {
        grad_comm_arm(g, 1, step);
        backward(g, grads, c->order, step);
        grad_comm_finish(g);
        wrong[step] = count_wrong(grads, N, step, 1, &first[step]);
    }
    comm_stats st = grad_comm_get_stats(g);
    grad_comm_free(g);
    for (int step = 0; step < STEPS; step++)
        ck_assert_msg(wrong[step] == 0,
                      "%s, step %d: %zu of %d gradients are not the sum over %d ranks "
                      "(first at %zu)",
                      c->name, step, wrong[step], N, world, first[step]);
    ck_assert_msg(st.buckets == c->buckets, "%s: %d buckets, the rule gives %d", c->name, st.buckets, c->buckets);
    ck_assert_msg(st.reductions == STEPS, "%s: %ld reductions after %d armed steps", c->name, st.reductions, STEPS);
    ck_assert_msg(st.blocking_s > 0 && st.blocking_s < 60, "%s: blocking all-reduce time %g s", c->name, st.blocking_s);
}
END_TEST

/* Naps of 1 ms, making no MPI call, for seconds or until the progress thread found the buckets complete. */
static void compute_without_mpi(grad_comm *g, double seconds)
{
    for (double t = 0; t < seconds && !grad_comm_progressed(g); t += 0.001)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

/* The progress thread moves the all-reduce while this thread makes no MPI call (conv2's backward): a bucket
 * of 4 MB (several rounds of Rabenseifner's algorithm, each needing the library's attention), and a second one
 * posted after the thread found the first complete, are both complete before finish (within 10 s: a few ms
 * alone). Without the thread (interval 0) none is, 0.3 s later. The sums are right either way. Starting a
 * thread leaves the caller's signals unblocked. */
START_TEST(test_progress_thread_moves)
{
    enum { M = 1 << 20, STEPS_P = 2 };
    static float grads[M];
    long interval = _i ? 200 : 0;
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, M, M / 2 * sizeof(float), TIMEOUT_S);
    sigset_t before, after;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    grad_comm_set_progress(g, interval);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    /* The thread starts with every signal blocked; its starter (the trainer's main thread, which handles
     * preemption's signals) keeps none of them blocked, here or after the earlier cases' threads. */
    static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t k = 0; k < sizeof sigs / sizeof *sigs; k++)
        ck_assert_msg(!sigismember(&before, sigs[k]) && !sigismember(&after, sigs[k]),
                      "signal %d blocked (%d before the progress thread started, %d after)", sigs[k],
                      sigismember(&before, sigs[k]), sigismember(&after, sigs[k]));
    for (int step = 0; step < STEPS_P; step++) {
        grad_comm_arm(g, 1, step);
        for (size_t i = 0; i < M; i++)
            grads[i] = grad_value(rank, i, step);
        grad_comm_ready(g, M / 2, M / 2);
        compute_without_mpi(g, interval ? 10 : 0.1);
        grad_comm_ready(g, 0, M / 2);
        compute_without_mpi(g, interval ? 10 : 0.3);
        grad_comm_finish(g);
    }
    comm_stats st = grad_comm_get_stats(g);
    grad_comm_free(g);
    size_t first = 0, wrong = count_wrong(grads, M, STEPS_P - 1, 1, &first);
    ck_assert_msg(wrong == 0, "%zu of %d gradients are not the sum over %d ranks (first at %zu)", wrong, M, world,
                  first);
    ck_assert_int_eq(st.reductions, STEPS_P);
    ck_assert_msg(st.early == (interval ? STEPS_P : 0),
                  "progress thread every %ld us: %ld of %d reductions complete before finish, want %d", interval,
                  st.early, STEPS_P, interval ? STEPS_P : 0);
}
END_TEST

/* Gradient accumulation: the first micro-batch runs unarmed and must keep this rank's own gradients. */
START_TEST(test_unarmed_pass_is_local)
{
    float grads[N];
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, N, 8 * sizeof(float), TIMEOUT_S);
    size_t first = 0;
    grad_comm_arm(g, 0, 0);
    backward(g, grads, back_to_front, 0);
    grad_comm_finish(g);
    size_t local_wrong = count_wrong(grads, N, 0, 0, &first);
    long unarmed_reductions = grad_comm_get_stats(g).reductions;
    grad_comm_arm(g, 1, 0);
    backward(g, grads, back_to_front, 1);
    grad_comm_finish(g);
    size_t sum_wrong = count_wrong(grads, N, 1, 1, &first);
    long reductions = grad_comm_get_stats(g).reductions;
    grad_comm_free(g);
    ck_assert_msg(local_wrong == 0, "an unarmed pass changed %zu of this rank's %d gradients", local_wrong, N);
    ck_assert_msg(unarmed_reductions == 0, "an unarmed pass counted as %ld reductions", unarmed_reductions);
    ck_assert_msg(sum_wrong == 0, "the armed pass after an unarmed one: %zu gradients are not the sum", sum_wrong);
    ck_assert_msg(reductions == 1, "%ld reductions after one armed pass", reductions);
}
END_TEST

/* Values whose sum over ranks and mean are exact: (i + 1) (r + 1) / 2 averages to (i + 1) (W + 1) / 4. */
START_TEST(test_average)
{
    enum { M = 10 };
    float p[M + 1];
    for (size_t i = 0; i < M; i++)
        p[i] = (float)(i + 1) * (float)(rank + 1) * 0.5f;
    p[M] = -1; /* past n: must stay */
    comm_average(p, M);
    comm_average(p + M, 0);
    for (size_t i = 0; i < M; i++) {
        float want = (float)(i + 1) * (float)(world + 1) * 0.25f;
        ck_assert_msg(p[i] == want, "element %zu: %g, the mean over %d ranks is %g (the sum %g)", i, (double)p[i],
                      world, (double)want, (double)(want * (float)world));
    }
    ck_assert_msg(p[M] == -1, "comm_average wrote past n");
}
END_TEST

START_TEST(test_replicas_identical_pass)
{
    float p[N];
    for (size_t i = 0; i < N; i++)
        p[i] = grad_value(0, i, 0);
    comm_check_replicas(p, N, "in the test"); /* stops the job with 70 if it disagrees */
}
END_TEST

enum { FP_N = 16 };

/* Distinct values, signs and magnitudes, a zero and a subnormal. */
static void fp_buffer(float *p)
{
    for (size_t i = 0; i < FP_N; i++)
        p[i] = (float)((int)i - 5) * 0.37f + (float)i * 1e-3f;
    p[3] = 0.0f;
    p[9] = 1e-40f;
}

static float flip_bit(float x, int bit)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u ^= (uint32_t)1 << bit;
    memcpy(&x, &u, sizeof x);
    return x;
}

START_TEST(test_fingerprint_equal_buffers)
{
    float a[FP_N], b[FP_N];
    fp_buffer(a);
    fp_buffer(b);
    ck_assert_uint_eq(buffer_fingerprint(a, FP_N), buffer_fingerprint(b, FP_N));
}
END_TEST

START_TEST(test_fingerprint_every_bit)
{
    float p[FP_N];
    fp_buffer(p);
    uint64_t base = buffer_fingerprint(p, FP_N);
    for (size_t i = 0; i < FP_N; i++)
        for (int bit = 0; bit < 32; bit++) {
            float keep = p[i];
            p[i] = flip_bit(keep, bit);
            uint64_t h = buffer_fingerprint(p, FP_N);
            p[i] = keep;
            ck_assert_msg(h != base, "flipping bit %d of element %zu leaves the fingerprint unchanged", bit, i);
        }
}
END_TEST

/* The documented contract (comm.h): the fingerprint depends on the order of the elements. */
START_TEST(test_fingerprint_order)
{
    float p[FP_N];
    fp_buffer(p);
    uint64_t base = buffer_fingerprint(p, FP_N);
    for (size_t i = 0; i < FP_N; i++)
        for (size_t j = i + 1; j < FP_N; j++) {
            float t = p[i];
            p[i] = p[j], p[j] = t;
            uint64_t h = buffer_fingerprint(p, FP_N);
            p[j] = p[i], p[i] = t;
            ck_assert_msg(h != base, "swapping elements %zu and %zu leaves the fingerprint unchanged", i, j);
        }
}
END_TEST

/* A model-sized buffer (net's 1,199,882 parameters): one flipped bit in any of the last 64 elements, and in
 * the first, changes the fingerprint. The 16-element buffer above cannot tell a loop cut short from a whole
 * one; a replica damaged near its end must not go unreported. */
enum { FP_MODEL = 1199882 };
START_TEST(test_fingerprint_model_size)
{
    float *p = malloc(FP_MODEL * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < FP_MODEL; i++)
        p[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    uint64_t base = buffer_fingerprint(p, FP_MODEL);
    for (size_t i = FP_MODEL - 64; i <= FP_MODEL; i++) {
        size_t at = i < FP_MODEL ? i : 0;
        float keep = p[at];
        p[at] = flip_bit(keep, (int)(i % 32));
        uint64_t h = buffer_fingerprint(p, FP_MODEL);
        p[at] = keep;
        ck_assert_msg(h != base, "flipping bit %d of element %zu of %d leaves the fingerprint unchanged", (int)(i % 32),
                      at, FP_MODEL);
    }
    free(p);
}
END_TEST

/* The value of an integer MPI_T control variable; 0 when the library has no variable of that name. */
static int cvar_int(const char *want, int *value)
{
    int provided, n, found = 0;
    ck_assert_int_eq(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
    ck_assert_int_eq(MPI_T_cvar_get_num(&n), MPI_SUCCESS);
    for (int i = 0; i < n && !found; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope) !=
                MPI_SUCCESS ||
            strcmp(name, want) != 0 || type != MPI_INT)
            continue;
        MPI_T_cvar_handle h;
        int count;
        ck_assert_int_eq(MPI_T_cvar_handle_alloc(i, NULL, &h, &count), MPI_SUCCESS);
        ck_assert_int_eq(MPI_T_cvar_read(h, value), MPI_SUCCESS);
        MPI_T_cvar_handle_free(&h);
        found = 1;
    }
    MPI_T_finalize();
    return found;
}

START_TEST(test_iallreduce_algorithm)
{
    int value = -1;
    if (!cvar_int("coll_libnbc_iallreduce_algorithm", &value))
        ck_abort_msg("Open MPI's libnbc has no coll_libnbc_iallreduce_algorithm control variable here");
    ck_assert_msg(value == nbc_expected,
                  "libnbc's iallreduce algorithm is %d, not %d (bootstrap.c: Rabenseifner "
                  "unless the environment chose)",
                  value, nbc_expected);
}
END_TEST

/* ---- --grad-comm bf16 -------------------------------------------------------------------------- */

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The rounding itself: exact values kept, ties to even, overflow to infinity, NaN kept. */
START_TEST(test_bf16_rounding)
{
    const float keep[] = {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 0x1p-130f /* a subnormal bf16 holds */};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        ck_assert_msg(bits(float_from_bf16(bf16_from_float(keep[i]))) == bits(keep[i]), "%g not kept", keep[i]);
    ck_assert_float_eq(float_from_bf16(bf16_from_float(1.0f + 0x1p-8f)), 1.0f);           /* tie: even is 1 */
    ck_assert_float_eq(float_from_bf16(bf16_from_float(1.0f + 0x3p-8f)), 1.0f + 0x1p-6f); /* tie: up to even */
    ck_assert_float_eq(float_from_bf16(bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f); /* above */
    ck_assert_float_eq(float_from_bf16(bf16_from_float(-(1.0f + 0x3p-8f))), -(1.0f + 0x1p-6f));
    ck_assert(isinf(float_from_bf16(bf16_from_float(3.4e38f)))); /* above bf16's largest finite */
    ck_assert(isinf(float_from_bf16(bf16_from_float(INFINITY))));
    ck_assert(isnan(float_from_bf16(bf16_from_float(NAN))));
    ck_assert(isnan(float_from_bf16(bf16_from_float(-NAN))));
}
END_TEST

/* The bucketed exchange in bf16: values bf16 holds exactly (grad_value) come back as the exact sum, whatever
 * the buckets and order (the poisoned ranges prove each bucket starts on final gradients). */
START_TEST(test_bf16_buckets)
{
    const bucket_case *c = &cases[_i];
    float grads[N];
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, N, c->bucket_floats * sizeof(float), TIMEOUT_S);
    grad_comm_set_wire_bf16(g);
    size_t wrong = 0;
    size_t first = 0;
    for (int step = 0; step < STEPS; step++) {
        grad_comm_arm(g, 1, step);
        backward(g, grads, c->order, step);
        grad_comm_finish(g);
        wrong += count_wrong(grads, N, step, 1, &first);
    }
    grad_comm_free(g);
    ck_assert_msg(wrong == 0, "%s: %zu gradients are not the sum over %d ranks (first at %zu)", c->name, wrong, world,
                  first);
}
END_TEST

/* Values bf16 cannot hold: each rank's are rounded once, each addition is rounded, every rank gets the same
 * bits. With 2 ranks the one addition makes it exact: bf16(bf16(a0) + bf16(a1)). */
START_TEST(test_bf16_rounded_sum)
{
    enum { M = 1000 };
    float *grads = xmalloc(M * sizeof *grads);
    grad_comm *g = grad_comm_create(MPI_COMM_WORLD, grads, M, 256 * sizeof(float), TIMEOUT_S);
    grad_comm_set_wire_bf16(g);
    grad_comm_arm(g, 1, 0);
    for (size_t i = 0; i < M; i++)
        grads[i] = (float)(rank + 1) * 0.1f * (float)(i + 1) - 37.3f + 1e-3f * (float)rank;
    grad_comm_ready(g, 0, M);
    grad_comm_finish(g);
    grad_comm_free(g);
    comm_check_replicas(grads, M, "after the bf16 exchange"); /* 70 if any rank differs */
    int bad = 0, inexact = 0;
    for (size_t i = 0; i < M; i++) {
        double sum = 0, mag = 0; /* mag bounds every partial sum, so each addition's rounding */
        float two = 0;
        for (int r = 0; r < world; r++) {
            float a =
                float_from_bf16(bf16_from_float((float)(r + 1) * 0.1f * (float)(i + 1) - 37.3f + 1e-3f * (float)r));
            sum += a;
            mag += fabs(a);
            two = r == 0 ? a : float_from_bf16(bf16_from_float(two + a));
        }
        double ulp = ldexp(1.0, ilogb(mag) - 7);
        bad += (bits(grads[i]) & 0xffffu) != 0 || (world == 2 ? grads[i] != two : fabs(grads[i] - sum) > world * ulp);
        inexact += grads[i] != (float)sum;
    }
    free(grads);
    ck_assert_msg(bad == 0, "%d of %d sums are not what the bf16 exchange gives", bad, M);
    ck_assert_msg(inexact > 0, "no sum was rounded: the exchange did not go through bf16");
}
END_TEST

/* world.c's collectives, each with rank-dependent values that tell its operation, type and root from the
 * others (a sum from a maximum, longs from ints, root 1 from root 0, gathered order from any other), a
 * duplicate that returns errors even from a communicator whose errors are fatal, and the deadline's
 * default and setting. */
START_TEST(test_world_collectives)
{
    long w = world, tri = w * (w - 1) / 2;
    double d[2] = {rank + 1.5, -(double)rank}, m[2] = {rank + 1.5, -(double)rank};
    long l[1] = {rank * 10000000000L};
    int i[2] = {rank + 1, 1}, mn[2] = {rank + 3, -rank}, all[64], one = rank * 10 + 1;
    char buf[6] = "xxxxx";
    if (rank == 1)
        memcpy(buf, "from1", sizeof buf);
    world_sum_doubles(d, 2);
    world_max_doubles(m, 2);
    world_sum_longs(l, 1);
    world_sum_ints(i, 2);
    world_min_ints(mn, 2);
    world_bcast(buf, sizeof buf, 1);
    ck_assert_int_le(world, 64);
    world_allgather_on(MPI_COMM_WORLD, &one, all, sizeof one);
    ck_assert_double_eq(d[0], (double)tri + 1.5 * (double)w);
    ck_assert_double_eq(d[1], -(double)tri);
    ck_assert_double_eq(m[0], (double)w + 0.5);
    ck_assert_double_eq(m[1], 0.0);
    ck_assert_int_eq(l[0], tri * 10000000000L);
    ck_assert_int_eq(i[0], w * (w + 1) / 2);
    ck_assert_int_eq(i[1], w);
    ck_assert_int_eq(mn[0], 3);
    ck_assert_int_eq(mn[1], 1 - w);
    ck_assert_str_eq(buf, "from1");
    for (int r = 0; r < world; r++)
        ck_assert_int_eq(all[r], r * 10 + 1);
    memset(all, 0, sizeof all);
    world_gather(&one, all, sizeof one);
    for (int r = 0; r < world && rank == 0; r++)
        ck_assert_int_eq(all[r], r * 10 + 1);
    ck_assert_int_eq(world_size(), world);
    MPI_Comm fatal, dup;
    MPI_Errhandler eh;
    MPI_Comm_dup(MPI_COMM_WORLD, &fatal);
    MPI_Comm_set_errhandler(fatal, MPI_ERRORS_ARE_FATAL);
    world_dup_on(fatal, &dup);
    MPI_Comm_get_errhandler(dup, &eh);
    ck_assert_msg(eh == MPI_ERRORS_RETURN, "the duplicate kept its parent's fatal errors");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&fatal);
    const char *opt = NULL;
    double was = world_deadline(&opt);
    ck_assert_str_eq(opt, "--comm-timeout");
    world_set_deadline(12.5, "--other");
    ck_assert_double_eq(world_deadline(&opt), 12.5);
    ck_assert_str_eq(opt, "--other");
    world_set_deadline(was, "--comm-timeout");
}
END_TEST

/* Under MPI a message names the rank and the world's size before the host: the line as a whole. */
START_TEST(test_message_names_rank)
{
    char want[600], got[600] = "", host[256] = "?";
    gethostname(host, sizeof host - 1);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(f), STDERR_FILENO);
    warn_at("src/x.c", 12, "note %d", rank);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    ck_assert_ptr_nonnull(fgets(got, sizeof got, f));
    fclose(f);
    snprintf(want, sizeof want, "mnist_ddp: warning: note %d [rank %d/%d on %s, src/x.c:12]\n", rank, rank, world,
             host);
    ck_assert_str_eq(got, want);
}
END_TEST

static Suite *comm_suite(void)
{
    Suite *s = suite_create("comm_mpi");
    TCase *tc = tcase_create("collectives");
    tcase_add_loop_test(tc, test_grad_buckets, 0, 2 * NCASES);
    tcase_add_loop_test(tc, test_progress_thread_moves, 0, 2);
    tcase_add_test(tc, test_unarmed_pass_is_local);
    tcase_add_test(tc, test_average);
    tcase_add_test(tc, test_replicas_identical_pass);
    tcase_add_test(tc, test_iallreduce_algorithm);
    tcase_add_test(tc, test_world_collectives);
    tcase_add_test(tc, test_message_names_rank);
    suite_add_tcase(s, tc);
    TCase *fp = tcase_create("fingerprint");
    tcase_add_test(fp, test_fingerprint_equal_buffers);
    tcase_add_test(fp, test_fingerprint_every_bit);
    tcase_add_test(fp, test_fingerprint_order);
    tcase_add_test(fp, test_fingerprint_model_size);
    suite_add_tcase(s, fp);
    TCase *bf = tcase_create("bf16");
    tcase_add_test(bf, test_bf16_rounding);
    tcase_add_loop_test(bf, test_bf16_buckets, 0, NCASES);
    tcase_add_test(bf, test_bf16_rounded_sum);
    suite_add_tcase(s, bf);
    return s;
}

int main(int argc, char **argv)
{
    const char *preset = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    if (preset)
        nbc_expected = atoi(preset);
    ddp_env env;
    bootstrap_init(&argc, &argv, &env);
    rank = world_rank(), world = env.world;
    if (world < 2) {
        fprintf(stderr, "mpi_comm: needs 2 or more ranks: run it through make check (tests/run-test), or "
                        "under mpirun -np 2\n");
        bootstrap_finalize(&env);
        return EXIT_FAILURE;
    }
    int rc = check_run(comm_suite());
    bootstrap_finalize(&env);
    return rc;
}
