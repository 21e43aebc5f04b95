#include "base/profile.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/errors.h"
#include "base/log.h"

int profile_active;

static struct {
    const char *name;
    int training;
    double s;
} phase[PROFILE_MAX_PHASES];
static int nphases;
static double last;              /* the stopwatch: the previous lap or mark */
static const profile_clock *clk; /* NULL: the host's clock (last) */

void profile_use_clock(const profile_clock *c) { clk = c; }

void profile_enable(int on)
{
    profile_active = on;
    nphases = 0;
    last = clock_now();
}

/* The phase called name, added at the end on first use. */
static int find(const char *name, int training)
{
    for (int i = 0; i < nphases; i++)
        if (phase[i].name == name || strcmp(phase[i].name, name) == 0)
            return i;
    if (nphases == PROFILE_MAX_PHASES || strlen(name) >= PROFILE_NAME_LEN)
        die(EX_SOFTWARE, "profile: no room for phase '%s'", name);
    phase[nphases].name = name;
    phase[nphases].training = training;
    phase[nphases].s = 0;
    return nphases++;
}

void profile_lap_on(const char *name)
{
    int i = find(name, 1);
    if (clk) {
        clk->lap(i);
        return;
    }
    double now = clock_now();
    phase[i].s += now - last;
    last = now;
}

void profile_mark_on(void)
{
    if (clk)
        clk->mark();
    else
        last = clock_now();
}

void profile_hold_on(void)
{
    if (clk && clk->hold)
        clk->hold();
}

void profile_add(int i, double seconds)
{
    if (i < 0 || i >= nphases)
        die(EX_SOFTWARE, "profile: device time for phase %d of %d", i, nphases);
    phase[i].s += seconds;
}

void profile_record(const char *name, double seconds)
{
    if (profile_active)
        phase[find(name, 0)].s += seconds;
}

void profile_snapshot(profile_table *t)
{
    if (clk && profile_active)
        clk->flush();
    memset(t, 0, sizeof *t);
    t->about = clk ? clk->about : NULL;
    t->clock = clk ? clk->name : "host";
    t->held = clk && clk->hold;
    t->n = nphases;
    for (int i = 0; i < nphases; i++) {
        snprintf(t->name[i], sizeof t->name[i], "%s", phase[i].name);
        t->training[i] = phase[i].training;
    }
}

double profile_seconds(const char *name)
{
    for (int j = 0; j < nphases; j++)
        if (strcmp(name, phase[j].name) == 0)
            return phase[j].s;
    return 0;
}

static void print_row(const char *name, double max, double mean, double train_mean)
{
    char share[16] = "";
    if (train_mean > 0)
        snprintf(share, sizeof share, " %6.1f%%", 100 * mean / train_mean);
    say("  %-26s %9.3f %9.3f%s", name, max, mean, share);
}

static double training_phases_sum(const profile_table *t)
{
    double covered = 0;
    for (int i = 0; i < t->n; i++)
        covered += t->training[i] ? t->mean[i] : 0;
    return covered;
}

/* What a phase's share is of. Held steps: the holds are training time in no phase, so the phases' sum. */
static double share_base(const profile_table *t) { return t->held ? training_phases_sum(t) : t->train_mean; }

void profile_print(const profile_table *t)
{
    if (t->about)
        say("profile: %s", t->about);
    double covered = training_phases_sum(t), whole = share_base(t);
    say("profile: seconds per phase, max and mean over %d rank%s; share of the %s", t->ranks, t->ranks == 1 ? "" : "s",
        t->held ? "training phases' sum" : "mean training time");
    say("  %-26s %9s %9s %7s", "phase", "max", "mean", "share");
    for (int i = 0; i < t->n; i++)
        if (t->training[i])
            print_row(t->name[i], t->max[i], t->mean[i], whole);
    print_row("training (trainer's clock)", t->train_max, t->train_mean, t->held ? 0 : whole);
    for (int i = 0; i < t->n; i++)
        if (!t->training[i])
            print_row(t->name[i], t->max[i], t->mean[i], 0);
    say("profile: the training phases cover %.1f%% of the training time%s",
        t->train_mean > 0 ? 100 * covered / t->train_mean : 0, t->held ? ", the steps' holds the rest" : "");
}

char *profile_json(const profile_table *t, char *buf, size_t len)
{
    size_t at =
        (size_t)snprintf(buf, len,
                         "{\"ranks\":%d,\"clock\":\"%s\",\"held\":%s,\"train_max_s\":%.6f,"
                         "\"train_mean_s\":%.6f,\"share_of_s\":%.6f,\"phases\":[",
                         t->ranks, t->clock, t->held ? "true" : "false", t->train_max, t->train_mean, share_base(t));
    for (int i = 0; i < t->n && at < len; i++)
        at +=
            (size_t)snprintf(buf + at, len - at, "%s{\"phase\":\"%s\",\"training\":%s,\"max_s\":%.6f,\"mean_s\":%.6f}",
                             i ? "," : "", t->name[i], t->training[i] ? "true" : "false", t->max[i], t->mean[i]);
    if (at < len)
        snprintf(buf + at, len - at, "]}");
    if (at + 2 >= len)
        die(EX_SOFTWARE, "profile: JSON buffer of %zu bytes too small", len);
    return buf;
}
