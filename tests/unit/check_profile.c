/* --profile's bookkeeping (profile.c) without a run: phases in order of first use and found by their text,
 * the table's room (40 phases, names of 31 characters) at N and N+1, records only while on, a device clock's
 * laps by index, holds and flushes, the JSON at its exact buffer size, and the printed table as whole lines
 * (training phases, the trainer's row, the others; shares of the training time or of the phases' sum). */
#include "../check_run.h"
#include <stdio.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "base/profile.h"

static char names[PROFILE_MAX_PHASES + 1][PROFILE_NAME_LEN + 1]; /* outlive the phases, as literals do */

/* The first n phases recorded (one second each), with distinct names. */
static void fill(int n)
{
    profile_enable(1);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "phase %d", i);
        profile_record(names[i], 1.0);
    }
}

START_TEST(room_at_limit)
{
    fill(PROFILE_MAX_PHASES);
    profile_table t;
    profile_snapshot(&t);
    ck_assert_int_eq(t.n, PROFILE_MAX_PHASES);
    ck_assert_str_eq(t.name[PROFILE_MAX_PHASES - 1], "phase 39");
    /* The longest name that fits, beside the full table. */
    profile_enable(1);
    memset(names[0], 'x', PROFILE_NAME_LEN - 1);
    names[0][PROFILE_NAME_LEN - 1] = '\0';
    profile_record(names[0], 2.0);
    ck_assert_double_eq(profile_seconds(names[0]), 2.0);
}
END_TEST

START_TEST(room_past_limit) /* exit test: EX_SOFTWARE */
{
    if (_i == 0) {
        fill(PROFILE_MAX_PHASES + 1);
    } else {
        profile_enable(1);
        memset(names[0], 'x', PROFILE_NAME_LEN);
        names[0][PROFILE_NAME_LEN] = '\0';
        profile_record(names[0], 1.0);
    }
}
END_TEST

/* A name is its text, not its address, and not a prefix; records count only while profiling, which starts
 * over each time it is enabled or disabled. */
START_TEST(names_and_records)
{
    profile_enable(1);
    char copy[] = "conv";
    profile_record("conv1", 1.0);
    profile_record("conv", 2.0);
    profile_record(copy, 4.0);
    ck_assert_double_eq(profile_seconds("conv"), 6.0);
    ck_assert_double_eq(profile_seconds("conv1"), 1.0);
    ck_assert_double_eq(profile_seconds("conv10"), 0.0);
    profile_active = 0; /* off, as between runs: nothing is added */
    profile_record("conv", 8.0);
    ck_assert_double_eq(profile_seconds("conv"), 6.0);
    profile_enable(0); /* forgets the phases */
    ck_assert_double_eq(profile_seconds("conv"), 0.0);
    profile_enable(1);
    profile_table t;
    profile_snapshot(&t);
    ck_assert_int_eq(t.n, 0);
    ck_assert_str_eq(t.clock, "host");
    ck_assert_ptr_null(t.about);
    ck_assert_int_eq(t.held, 0);
}
END_TEST

static int laps[8], nlaps, marks, holds, flushes;
static void fake_lap(int phase) { laps[nlaps++] = phase; }
static void fake_mark(void) { marks++; }
static void fake_hold(void) { holds++; }
static void fake_flush(void) { flushes++; }

/* A device clock gets each lap as its phase's index and adds the times later; the table says whether it
 * holds steps. An index outside the phases is a programming error. */
START_TEST(device_clock)
{
    const profile_clock with_hold = {fake_lap, fake_mark, fake_flush, fake_hold, "device events", "events"},
                        no_hold = {fake_lap, fake_mark, fake_flush, NULL, "stamps", "stamps"};
    profile_use_clock(&with_hold);
    profile_enable(1);
    profile_lap("a");
    profile_lap("b");
    profile_lap("a");
    profile_mark();
    profile_hold();
    ck_assert_int_eq(nlaps, 3);
    ck_assert_int_eq(laps[0], 0);
    ck_assert_int_eq(laps[1], 1);
    ck_assert_int_eq(laps[2], 0);
    ck_assert_int_eq(marks, 1);
    ck_assert_int_eq(holds, 1);
    profile_add(1, 0.25);
    ck_assert_double_eq(profile_seconds("b"), 0.25);
    profile_table t;
    profile_snapshot(&t);
    ck_assert_int_eq(flushes, 1);
    ck_assert_int_eq(t.held, 1);
    ck_assert_str_eq(t.clock, "events");
    ck_assert_str_eq(t.about, "device events");
    profile_use_clock(&no_hold);
    profile_hold(); /* nothing to call */
    profile_snapshot(&t);
    ck_assert_int_eq(t.held, 0);
    profile_enable(0);
    profile_snapshot(&t); /* off: no device to wait for */
    ck_assert_int_eq(flushes, 2);
}
END_TEST

START_TEST(device_index_refused) /* exit test: EX_SOFTWARE */
{
    const profile_clock c = {fake_lap, fake_mark, fake_flush, NULL, "x", "x"};
    profile_use_clock(&c);
    profile_enable(1);
    profile_lap("a");
    profile_lap("b");
    profile_add(_i ? -1 : 2, 1.0);
}
END_TEST

/* Three phases, the middle one outside training: forward, evaluation, backward. */
static void table(profile_table *t, int held, int ranks)
{
    memset(t, 0, sizeof *t);
    const char *n[3] = {"forward", "evaluation", "backward"};
    const double max[3] = {2, 3, 1}, mean[3] = {1.5, 2.5, 0.5};
    for (int i = 0; i < 3; i++) {
        snprintf(t->name[i], sizeof t->name[i], "%s", n[i]);
        t->training[i] = i != 1;
        t->max[i] = max[i];
        t->mean[i] = mean[i];
    }
    t->n = 3;
    t->ranks = ranks;
    t->train_max = t->train_mean = 4;
    t->clock = held ? "events" : "host";
    t->about = held ? "device events" : NULL;
    t->held = held;
}

static const char *printed(const profile_table *t)
{
    static char text[4096];
    FILE *f = tmpfile();
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fileno(f), STDOUT_FILENO);
    profile_print(t);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    return text;
}

START_TEST(print_whole_lines)
{
    profile_table t;
    table(&t, 0, 2);
    ck_assert_str_eq(printed(&t),
                     "profile: seconds per phase, max and mean over 2 ranks; share of the mean training time\n"
                     "  phase                            max      mean   share\n"
                     "  forward                        2.000     1.500   37.5%\n"
                     "  backward                       1.000     0.500   12.5%\n"
                     "  training (trainer's clock)     4.000     4.000  100.0%\n"
                     "  evaluation                     3.000     2.500\n"
                     "profile: the training phases cover 50.0% of the training time\n");
    table(&t, 1, 1);
    ck_assert_str_eq(printed(&t),
                     "profile: device events\n"
                     "profile: seconds per phase, max and mean over 1 rank; share of the training phases' sum\n"
                     "  phase                            max      mean   share\n"
                     "  forward                        2.000     1.500   75.0%\n"
                     "  backward                       1.000     0.500   25.0%\n"
                     "  training (trainer's clock)     4.000     4.000\n"
                     "  evaluation                     3.000     2.500\n"
                     "profile: the training phases cover 50.0% of the training time, the steps' holds the rest\n");
}
END_TEST

static const char json_text[] =
    "{\"ranks\":2,\"clock\":\"host\",\"held\":false,\"train_max_s\":4.000000,\"train_mean_s\":4.000000,"
    "\"share_of_s\":4.000000,\"phases\":[{\"phase\":\"forward\",\"training\":true,\"max_s\":2.000000,"
    "\"mean_s\":1.500000},{\"phase\":\"evaluation\",\"training\":false,\"max_s\":3.000000,\"mean_s\":2.500000},"
    "{\"phase\":\"backward\",\"training\":true,\"max_s\":1.000000,\"mean_s\":0.500000}]}";

/* The exact text in a buffer of exactly its size (with the NUL), and the held table's share base. */
START_TEST(json_exact_fit)
{
    profile_table t;
    char buf[sizeof json_text];
    table(&t, 0, 2);
    ck_assert_str_eq(profile_json(&t, buf, sizeof buf), json_text);
    table(&t, 1, 2);
    char big[1024];
    ck_assert_ptr_nonnull(strstr(profile_json(&t, big, sizeof big), ",\"held\":true,"));
    ck_assert_ptr_nonnull(strstr(big, ",\"share_of_s\":2.000000,"));
}
END_TEST

START_TEST(json_one_short) /* exit test: EX_SOFTWARE */
{
    profile_table t;
    char buf[sizeof json_text - 1];
    table(&t, 0, 2);
    profile_json(&t, buf, sizeof buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");
    tcase_add_test(tc, room_at_limit);
    tcase_add_loop_exit_test(tc, room_past_limit, EX_SOFTWARE, 0, 2);
    tcase_add_test(tc, names_and_records);
    tcase_add_test(tc, device_clock);
    tcase_add_loop_exit_test(tc, device_index_refused, EX_SOFTWARE, 0, 2);
    tcase_add_test(tc, print_whole_lines);
    tcase_add_test(tc, json_exact_fit);
    tcase_add_exit_test(tc, json_one_short, EX_SOFTWARE);
    suite_add_tcase(s, tc);
    return check_run(s);
}
