/* Distributed sampler: disjoint, complete, equal steps on all ranks, deterministic, reshuffled
 * per epoch, the same permutation for any world size, partial last batch. */
#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "base/errors.h"
#include "data/sampler.h"

static int is_permutation(const uint64_t *p, uint64_t n)
{
    unsigned char *seen = xcalloc(n ? n : 1, 1);
    int ok = 1;
    for (uint64_t i = 0; i < n && ok; i++) {
        if (p[i] >= n || seen[p[i]])
            ok = 0;
        else
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

START_TEST(steps_values)
{
    ck_assert_uint_eq(sampler_steps(0, 4, 32), 0);
    ck_assert_uint_eq(sampler_steps(1, 4, 32), 1);
    ck_assert_uint_eq(sampler_steps(128, 4, 32), 1);
    ck_assert_uint_eq(sampler_steps(129, 4, 32), 2);
    ck_assert_uint_eq(sampler_steps(60000, 1, 64), 938);
    ck_assert_uint_eq(sampler_steps(60000, 4, 64), 235);
    ck_assert_uint_eq(sampler_steps(60000, 3, 100), 200);
    ck_assert_uint_eq(sampler_steps(10000, 7, 128), 12);
    ck_assert_uint_eq(sampler_steps(5, 16, 1), 1);
}
END_TEST

/* Golden values from an independent (Python) implementation of the documented algorithm: a change
 * of the shuffle would silently change every training run. */
START_TEST(permutation_golden)
{
    static const uint64_t p42_0[10] = {6, 4, 2, 9, 3, 7, 5, 1, 8, 0};
    static const uint64_t p42_1[10] = {9, 2, 0, 5, 8, 1, 6, 7, 4, 3};
    static const uint64_t p0_0[16] = {8, 9, 4, 2, 3, 5, 12, 6, 13, 14, 15, 1, 10, 11, 0, 7};
    static const uint64_t p2024_7[20] = {8, 5, 10, 9, 3, 6, 13, 4, 1, 19, 7, 18, 14, 11, 17, 15, 16, 0, 2, 12};
    uint64_t p[20];
    sampler_permutation(42, 0, 10, p);
    ck_assert_int_eq(memcmp(p, p42_0, sizeof p42_0), 0);
    sampler_permutation(42, 1, 10, p);
    ck_assert_int_eq(memcmp(p, p42_1, sizeof p42_1), 0);
    sampler_permutation(0, 0, 16, p);
    ck_assert_int_eq(memcmp(p, p0_0, sizeof p0_0), 0);
    sampler_permutation(2024, 7, 20, p);
    ck_assert_int_eq(memcmp(p, p2024_7, sizeof p2024_7), 0);
}
END_TEST

START_TEST(permutation_valid)
{
    const uint64_t ns[] = {0, 1, 2, 3, 17, 1000, 60000};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        uint64_t n = ns[k], *p = xmalloc((n ? n : 1) * sizeof *p);
        for (uint64_t e = 0; e < 3; e++) {
            sampler_permutation(7, e, n, p);
            ck_assert_msg(is_permutation(p, n), "n=%llu epoch=%llu: not a permutation", (unsigned long long)n,
                          (unsigned long long)e);
        }
        free(p);
    }
}
END_TEST

START_TEST(permutation_deterministic_and_reshuffled)
{
    const uint64_t n = 60000;
    uint64_t *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    sampler_permutation(1234, 5, n, a);
    sampler_permutation(1234, 5, n, b);
    ck_assert_int_eq(memcmp(a, b, n * sizeof *a), 0);
    /* Other epoch, other seed: a different order (almost no fixed positions in common). */
    const uint64_t other[][2] = {{1234, 6}, {1234, 4}, {1235, 5}, {0, 5}};
    for (int k = 0; k < 4; k++) {
        sampler_permutation(other[k][0], other[k][1], n, b);
        uint64_t same = 0;
        for (uint64_t i = 0; i < n; i++)
            same += a[i] == b[i];
        ck_assert_msg(same < 20, "seed %llu epoch %llu: %llu positions equal", (unsigned long long)other[k][0],
                      (unsigned long long)other[k][1], (unsigned long long)same);
    }
    /* Not the identity, and not merely a rotation. */
    uint64_t fixed = 0, rot = 0;
    for (uint64_t i = 0; i < n; i++) {
        fixed += a[i] == i;
        rot += a[(i + 1) % n] == (a[i] + 1) % n;
    }
    ck_assert_uint_lt(fixed, 20);
    ck_assert_uint_lt(rot, 20);
    free(a);
    free(b);
}
END_TEST

/* Uniformity: each element lands at each position with probability 1/n (catches off-by-one
 * shuffles such as Sattolo's, which never leaves an element in place). */
START_TEST(permutation_uniform)
{
    enum { N = 5, EPOCHS = 50000 };
    unsigned count[N][N] = {{0}};
    uint64_t p[N];
    for (uint64_t e = 0; e < EPOCHS; e++) {
        sampler_permutation(99, e, N, p);
        for (int i = 0; i < N; i++)
            count[p[i]][i]++;
    }
    for (int v = 0; v < N; v++)
        for (int i = 0; i < N; i++)
            ck_assert_msg(count[v][i] > EPOCHS / N * 9 / 10 && count[v][i] < EPOCHS / N * 11 / 10,
                          "value %d at position %d: %u of %d", v, i, count[v][i], EPOCHS);
}
END_TEST

/* For many (n, world, batch): every rank takes sampler_steps() steps; in each step the ranks'
 * ranges are contiguous, in rank order, disjoint and cover the global batch; full batches give
 * every rank `batch` samples, the partial last batch chunks of ceil(R/world); over the epoch each
 * position is used exactly once. */
START_TEST(slices_disjoint_complete)
{
    const uint64_t ns[] = {1, 2, 7, 64, 100, 101, 127, 128, 129, 1000, 60000};
    const int worlds[] = {1, 2, 3, 4, 7, 8, 16, 33};
    const int batches[] = {1, 2, 5, 32, 64, 100};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof worlds / sizeof *worlds; b++)
            for (size_t c = 0; c < sizeof batches / sizeof *batches; c++) {
                uint64_t n = ns[a];
                int world = worlds[b], batch = batches[c];
                uint64_t g = (uint64_t)world * (uint64_t)batch, steps = sampler_steps(n, world, batch);
                ck_assert_uint_eq(steps, (n + g - 1) / g);
                uint64_t covered = 0;
                for (uint64_t s = 0; s < steps; s++) {
                    uint64_t expect_first = s * g, gc_want = n - s * g < g ? n - s * g : g;
                    uint64_t chunk = (gc_want + (uint64_t)world - 1) / (uint64_t)world;
                    for (int r = 0; r < world; r++) {
                        uint64_t first, count, gc;
                        sampler_slice(n, world, batch, r, s, &first, &count, &gc);
                        /* plain tests in the hot loop: every ck_assert costs a syscall */
                        if (gc != gc_want || first != expect_first || count > chunk ||
                            (gc == g && count != (uint64_t)batch))
                            ck_abort_msg("n=%llu world=%d batch=%d step=%llu rank=%d: first %llu count %llu "
                                         "global %llu (expected first %llu, global %llu, chunk %llu)",
                                         (unsigned long long)n, world, batch, (unsigned long long)s, r,
                                         (unsigned long long)first, (unsigned long long)count, (unsigned long long)gc,
                                         (unsigned long long)expect_first, (unsigned long long)gc_want,
                                         (unsigned long long)chunk);
                        expect_first += count;
                    }
                    if (expect_first != s * g + gc_want) /* covers the global batch */
                        ck_abort_msg("n=%llu world=%d batch=%d step=%llu: ranks cover up to %llu",
                                     (unsigned long long)n, world, batch, (unsigned long long)s,
                                     (unsigned long long)expect_first);
                    covered += gc_want;
                }
                ck_assert_uint_eq(covered, n);
            }
}
END_TEST

/* The explicit partial-last-batch example of the header. */
START_TEST(slices_partial_last)
{
    uint64_t first, count, gc;
    /* n = 10, world 4, batch 2: G = 8, 2 steps, last R = 2 split in chunks of 1: 1,1,0,0. */
    ck_assert_uint_eq(sampler_steps(10, 4, 2), 2);
    const uint64_t want_first[4] = {8, 9, 10, 10}, want_count[4] = {1, 1, 0, 0};
    for (int r = 0; r < 4; r++) {
        sampler_slice(10, 4, 2, r, 0, &first, &count, &gc);
        ck_assert_uint_eq(first, (uint64_t)r * 2);
        ck_assert_uint_eq(count, 2);
        ck_assert_uint_eq(gc, 8);
        sampler_slice(10, 4, 2, r, 1, &first, &count, &gc);
        ck_assert_uint_eq(first, want_first[r]);
        ck_assert_uint_eq(count, want_count[r]);
        ck_assert_uint_eq(gc, 2);
    }
    /* n = 13, world 3, batch 4: last R = 1: ranks get 1, 0, 0. n = 22: R = 10 -> 4, 4, 2. */
    sampler_slice(13, 3, 4, 0, 1, &first, &count, &gc);
    ck_assert_uint_eq(first, 12);
    ck_assert_uint_eq(count, 1);
    ck_assert_uint_eq(gc, 1);
    sampler_slice(13, 3, 4, 2, 1, &first, &count, &gc);
    ck_assert_uint_eq(count, 0);
    sampler_slice(22, 3, 4, 2, 1, &first, &count, &gc);
    ck_assert_uint_eq(first, 20);
    ck_assert_uint_eq(count, 2);
    ck_assert_uint_eq(gc, 10);
}
END_TEST

/* World-size independence: the epoch order is the same permutation whatever the world size, and
 * with the same global batch G = world * batch every step trains on the same set of samples. */
START_TEST(world_size_independent)
{
    const uint64_t n = 1001;
    uint64_t *perm = xmalloc(n * sizeof *perm);
    sampler_permutation(31337, 2, n, perm);
    const int splits[][2] = {{1, 24}, {2, 12}, {3, 8}, {4, 6}, {6, 4}, {8, 3}, {12, 2}, {24, 1}};
    uint64_t steps0 = sampler_steps(n, 1, 24);
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        int world = splits[k][0], batch = splits[k][1];
        ck_assert_uint_eq(sampler_steps(n, world, batch), steps0);
        /* Rebuild the epoch order from the ranks' pieces: it must be the permutation itself. */
        uint64_t *order = xmalloc(n * sizeof *order), o = 0;
        for (uint64_t s = 0; s < steps0; s++) {
            uint64_t lo = UINT64_MAX, hi = 0;
            for (int r = 0; r < world; r++) {
                uint64_t first, count, gc;
                sampler_slice(n, world, batch, r, s, &first, &count, &gc);
                for (uint64_t i = 0; i < count; i++)
                    order[o++] = perm[first + i];
                if (count && first < lo)
                    lo = first;
                if (count && first + count > hi)
                    hi = first + count;
            }
            ck_assert_uint_eq(lo, s * 24);
            ck_assert_uint_eq(hi, s * 24 + 24 < n ? s * 24 + 24 : n);
        }
        ck_assert_uint_eq(o, n);
        ck_assert_int_eq(memcmp(order, perm, n * sizeof *perm), 0);
        free(order);
    }
    free(perm);
}
END_TEST

/* Misuse dies EX_SOFTWARE (a bug in the caller, not bad data). */
START_TEST(die_world_zero) { (void)sampler_steps(10, 0, 4); }
END_TEST
START_TEST(die_batch_zero) { (void)sampler_steps(10, 2, 0); }
END_TEST
START_TEST(die_rank_out_of_range)
{
    uint64_t f, c, g;
    sampler_slice(100, 4, 8, 4, 0, &f, &c, &g);
}
END_TEST
START_TEST(die_step_past_end)
{
    uint64_t f, c, g;
    sampler_slice(100, 4, 8, 0, 4, &f, &c, &g);
}
END_TEST
START_TEST(die_too_many_samples) { sampler_permutation(1, 1, (UINT64_C(1) << 32) + 1, NULL); }
END_TEST

static Suite *sampler_suite(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("permutation");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, steps_values);
    tcase_add_test(tc, permutation_golden);
    tcase_add_test(tc, permutation_valid);
    tcase_add_test(tc, permutation_deterministic_and_reshuffled);
    tcase_add_test(tc, permutation_uniform);
    suite_add_tcase(s, tc);
    tc = tcase_create("slices");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, slices_disjoint_complete);
    tcase_add_test(tc, slices_partial_last);
    tcase_add_test(tc, world_size_independent);
    suite_add_tcase(s, tc);
    tc = tcase_create("misuse");
    tcase_add_exit_test(tc, die_world_zero, EX_SOFTWARE);
    tcase_add_exit_test(tc, die_batch_zero, EX_SOFTWARE);
    tcase_add_exit_test(tc, die_rank_out_of_range, EX_SOFTWARE);
    tcase_add_exit_test(tc, die_step_past_end, EX_SOFTWARE);
    tcase_add_exit_test(tc, die_too_many_samples, EX_SOFTWARE);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    error_set_program("check_sampler");
    return check_run(sampler_suite());
}
