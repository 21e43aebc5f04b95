/* The pure decisions of the gradient all-reduce (src/comm/comm_plan.c), shared by the MPI and NCCL paths: the
 * bucket rule and the overlap figure. */
#include "../check_run.h"
#include <stdint.h>
#include <string.h>

#include "comm/comm_plan.h"
#include "base/rng.h"

/* Applies a sequence of ready ranges and the flush; returns the started ranges in order. */
typedef struct {
    size_t start, count;
} range;

static int run_plan(size_t n, size_t bucket, const range *ready, int nready, range *out)
{
    bucket_plan b;
    bucket_init(&b, n, bucket);
    int k = 0;
    for (int i = 0; i < nready; i++) {
        size_t s[2], c[2];
        int m = bucket_ready(&b, ready[i].start, ready[i].count, s, c);
        ck_assert_int_le(m, 2);
        for (int j = 0; j < m; j++)
            out[k++] = (range){s[j], c[j]};
    }
    size_t s, c;
    if (bucket_flush(&b, &s, &c))
        out[k++] = (range){s, c};
    ck_assert_int_eq(bucket_flush(&b, &s, &c), 0);
    return k;
}

START_TEST(test_buckets_fixed)
{
    range out[16];
    /* Back to front, adjacent: a bucket starts once it holds 30 floats. */
    const range a[] = {{90, 10}, {70, 20}, {50, 20}, {0, 50}};
    ck_assert_int_eq(run_plan(100, 30, a, 4, out), 2);
    ck_assert_uint_eq(out[0].start, 70);
    ck_assert_uint_eq(out[0].count, 30);
    ck_assert_uint_eq(out[1].start, 0);
    ck_assert_uint_eq(out[1].count, 70);
    /* A gap (70..90 not reported yet): the pending range starts, a new one begins; the flush sends the rest. */
    const range b[] = {{90, 10}, {50, 20}, {70, 20}, {0, 50}};
    int k = run_plan(100, 1000, b, 4, out);
    ck_assert_int_eq(k, 4);
    ck_assert_uint_eq(out[0].start, 90);
    ck_assert_uint_eq(out[1].start, 50);
    ck_assert_uint_eq(out[1].count, 20);
    ck_assert_uint_eq(out[2].start, 70);
    ck_assert_uint_eq(out[2].count, 20);
    ck_assert_uint_eq(out[3].start, 0);
    ck_assert_uint_eq(out[3].count, 50);
    /* bucket 0: every range starts at once; empty ranges start nothing. */
    const range c[] = {{90, 10}, {90, 0}, {0, 90}};
    ck_assert_int_eq(run_plan(100, 0, c, 3, out), 2);
    ck_assert_uint_eq(out[0].count, 10);
    ck_assert_uint_eq(out[1].count, 90);
    /* One bucket larger than the model: a single all-reduce at the flush. */
    const range d[] = {{60, 40}, {20, 40}, {0, 20}};
    ck_assert_int_eq(run_plan(100, 1u << 30, d, 3, out), 1);
    ck_assert_uint_eq(out[0].start, 0);
    ck_assert_uint_eq(out[0].count, 100);
}
END_TEST

/* Random layer sizes, random order perturbations, random bucket sizes: every gradient is reduced exactly
 * once, which is what the GPU test checks numerically. */
START_TEST(test_buckets_cover_once)
{
    enum { N = 5000, MAXL = 64 };
    static unsigned char hits[N];
    range layers[MAXL], out[4 * MAXL];
    for (uint64_t trial = 0; trial < 300; trial++) {
        uint64_t key = rng_key(42, trial);
        int nl = 1 + (int)(rng_uniform(key, 0) * (MAXL - 1));
        /* Cut [0, N) into nl layers. */
        size_t cut[MAXL + 1];
        cut[0] = 0;
        cut[nl] = N;
        for (int i = 1; i < nl; i++)
            cut[i] = (size_t)(rng_uniform(key, (uint64_t)i) * N);
        for (int i = 1; i < nl; i++) /* insertion sort */
            for (int j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
                size_t t = cut[j];
                cut[j] = cut[j - 1];
                cut[j - 1] = t;
            }
        for (int i = 0; i < nl; i++) /* back to front */
            layers[i] = (range){cut[nl - 1 - i], cut[nl - i] - cut[nl - 1 - i]};
        if (nl > 2 && rng_uniform(key, 1000) < 0.5) { /* a layer reported late */
            range t = layers[1];
            layers[1] = layers[2];
            layers[2] = t;
        }
        size_t bucket = (size_t)(rng_uniform(key, 2000) * 2 * N / (1 + trial % 7));
        int k = run_plan(N, bucket, layers, nl, out);
        memset(hits, 0, sizeof hits);
        for (int i = 0; i < k; i++) {
            ck_assert_uint_gt(out[i].count, 0);
            ck_assert_uint_le(out[i].start + out[i].count, N);
            for (size_t e = out[i].start; e < out[i].start + out[i].count; e++)
                hits[e]++;
        }
        size_t bad = N;
        for (size_t e = 0; e < N && bad == N; e++)
            if (hits[e] != 1)
                bad = e;
        ck_assert_msg(bad == N, "trial %llu: element %zu reduced %d times", (unsigned long long)trial, bad,
                      bad < N ? hits[bad] : 1);
    }
}
END_TEST

START_TEST(test_hidden_fraction)
{
    ck_assert_double_eq_tol(comm_hidden_fraction(0.25e-3, 1e-3), 0.75, 1e-12);
    ck_assert_double_eq_tol(comm_hidden_fraction(2e-3, 1e-3), 0, 1e-12);
    ck_assert_double_eq_tol(comm_hidden_fraction(0, 0), 0, 1e-12);
    comm_stats st = {.reductions = 4, .exposed_s = 2e-3};
    ck_assert_double_eq_tol(comm_exposed_per_step(&st), 0.5e-3, 1e-15);
    st.reductions = 0;
    ck_assert_double_eq_tol(comm_exposed_per_step(&st), 0, 1e-15);
}
END_TEST

/* MNIST_DDP_COMM_PROXY's values, and the ring's bytes and time: nccl-tests' bus bandwidth definition,
 * busbw = bytes / time * 2 (ranks - 1) / ranks, solved for the time. */
START_TEST(test_proxy)
{
    comm_proxy_spec p = {0};
    char why[128];
    ck_assert_int_eq(comm_proxy_parse("370", &p, why, sizeof why), 0);
    ck_assert_double_eq(p.bus_gbps, 370);
    ck_assert_int_eq(p.ranks, 8);
    ck_assert_double_eq_tol(comm_proxy_bytes(&p, 4e6), 7e6, 1e-6);
    ck_assert_double_eq_tol(comm_proxy_seconds(&p, 4e6), 7e6 / 370e9, 1e-15);
    ck_assert_int_eq(comm_proxy_parse("25:16", &p, why, sizeof why), 0);
    ck_assert_double_eq(p.bus_gbps, 25);
    ck_assert_int_eq(p.ranks, 16);
    ck_assert_double_eq_tol(comm_proxy_seconds(&p, 1e6), 2.0 * 15 / 16 * 1e6 / 25e9, 1e-15);
    ck_assert_int_eq(comm_proxy_parse("12.5:2", &p, why, sizeof why), 0);
    ck_assert_double_eq_tol(comm_proxy_bytes(&p, 1000), 1000, 1e-9); /* two ranks: each sends the bucket once */
    /* The bounds themselves: 100000 GB/s and 65536 ranks are accepted, one step past either is not. */
    ck_assert_int_eq(comm_proxy_parse("99999.9:65535", &p, why, sizeof why), 0);
    ck_assert_int_eq(comm_proxy_parse("100000:65536", &p, why, sizeof why), 0);
    ck_assert_double_eq(p.bus_gbps, 100000);
    ck_assert_int_eq(p.ranks, 65536);
    const char *bad[] = {"",       "0",    "-5",  "abc", "370:", "370:1",    "370:65537",
                         "370:8x", "370x", "1e6", "nan", ":8",   "100000.1", "100001:2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        ck_assert_msg(comm_proxy_parse(bad[i], &p, why, sizeof why) == -1, "'%s' accepted", bad[i]);
        ck_assert_msg(why[0], "'%s' refused without a reason", bad[i]);
    }
    comm_proxy_spec none = {0};
    ck_assert_double_eq(comm_proxy_seconds(&none, 4e6), 0);
}
END_TEST

/* The deadline of a wait: --comm-timeout until the first reduction, then --step-timeout only where it is
 * the shorter; a tie keeps --comm-timeout (values apart by far, so the one returned shows which was read). */
START_TEST(test_wait_deadline)
{
    const char *option = NULL;
    ck_assert_double_eq(comm_wait_deadline(600, 30, 0, &option), 600);
    ck_assert_str_eq(option, "--comm-timeout");
    ck_assert_double_eq(comm_wait_deadline(600, 30, 1, &option), 30);
    ck_assert_str_eq(option, "--step-timeout");
    ck_assert_double_eq(comm_wait_deadline(600, 30, 1000000, &option), 30);
    ck_assert_str_eq(option, "--step-timeout");
    ck_assert_double_eq(comm_wait_deadline(30, 600, 5, &option), 30);
    ck_assert_str_eq(option, "--comm-timeout");
    ck_assert_double_eq(comm_wait_deadline(45, 45, 5, &option), 45);
    ck_assert_str_eq(option, "--comm-timeout");
    ck_assert_double_eq(comm_wait_deadline(45, 44.5, 5, &option), 44.5);
    ck_assert_str_eq(option, "--step-timeout");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("comm_plan");
    TCase *tc = tcase_create("comm_plan");
    tcase_add_test(tc, test_buckets_fixed);
    tcase_add_test(tc, test_buckets_cover_once);
    tcase_add_test(tc, test_hidden_fraction);
    tcase_add_test(tc, test_proxy);
    tcase_add_test(tc, test_wait_deadline);
    suite_add_tcase(s, tc);
    return check_run(s);
}
