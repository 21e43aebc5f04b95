#include "config.h"

#include "train/train_run.h"
#include "train/replicas.h"
#include "comm/world.h"

#include <math.h>
#include <sys/resource.h>
#include <time.h>

#include "train/model_file.h"
#include "base/clock.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/profile.h"

/* Optimizer steps left in the run after step s (0-based) of epoch's steps: the rest of this epoch and the
 * epochs after it, or fewer under --max-steps. */
static uint64_t steps_left(const run *r, int epoch, uint64_t s, uint64_t steps)
{
    const options *o = r->o;
    uint64_t left = steps - (s + 1) + (uint64_t)(o->epochs - epoch) * steps;
    if (o->dry_run)
        return 0;
    if (o->max_steps && (uint64_t)(o->max_steps - r->step) < left)
        left = (uint64_t)(o->max_steps - r->step);
    return left;
}

/* The progress line after step s (0-based) of the epoch: loss and images/s since the last line, the
 * fraction of the epoch done, and the time left in the epoch and the run. That time is at this epoch's mean
 * step time (checkpoint writes left out; evaluations not counted). */
void report_progress(run *r, epoch_log *L, int epoch, uint64_t s, double lr)
{
    /* A GPU's one host wait of the interval (gpu.h: under the all-reduce's deadline). */
    double sums[2] = {model_take_loss(r->m), L->images_log};
    /* Every rank's local loss sum: the line shows the loss of all ranks' samples. Under the all-reduce's
     * deadline: a peer frozen between the two must not hang this one. */
    const char *option;
    double timeout = wait_deadline(r, &option);
    comm_allreduce_within(sums, 2, COMM_SUM, timeout, option, "progress-line sum", r->step);
    double t = clock_now(), loss = sums[0] / sums[1], ips = sums[1] / (t - L->t_log);
    double step_s = (t - L->t0 - (r->times.ckpt_total_s - L->ckpt0)) / (double)(s + 1 - L->first);
    uint64_t left_run = steps_left(r, epoch, s, L->steps), left_epoch = L->steps - (s + 1);
    if (left_epoch > left_run)
        left_epoch = left_run;
    double frac = (double)(s + 1) / (double)L->steps, eta_epoch = step_s * (double)left_epoch;
    double eta_run = step_s * (double)left_run;
    char e1[32], e2[32];
    progress("epoch %d step %llu/%llu (%.1f%%) loss %.4f lr %.4g images/s %.0f eta epoch %s run %s", epoch,
             (unsigned long long)(s + 1), (unsigned long long)L->steps, 100 * frac, loss, lr, ips,
             log_duration(eta_epoch, e1, sizeof e1), log_duration(eta_run, e2, sizeof e2));
    metrics("{\"type\":\"step\",\"epoch\":%d,\"step\":%llu,\"global_step\":%ld,\"loss\":%.6f,\"lr\":%.6g,"
            "\"images_per_s\":%.1f,\"epoch_fraction\":%.6f,\"step_s\":%.6f,\"eta_epoch_s\":%.3f,\"eta_run_s\":%.3f,"
            "\"time_s\":%.3f}",
            epoch, (unsigned long long)(s + 1), r->step, loss, lr, ips, frac, step_s, eta_epoch, eta_run,
            t - r->env->start_s);
    L->loss_epoch += sums[0];
    L->images_epoch += sums[1];
    L->images_log = 0;
    L->t_log = t;
}

/* Where the wall-clock time went, from the process's start: the phases, and what is in none of them. */
static void report_time(const run *r, double comm_exposed_s)
{
    double wall = clock_now() - r->env->start_s;
    double other =
        wall - r->times.startup_s - r->times.data_s - r->times.train_s - r->times.eval_s - r->times.ckpt_total_s;
    say("time: %.1f s wall: start-up %.1f s, data loading %.1f s, training %.1f s (communication exposed %.1f s), "
        "evaluation %.1f s, checkpoints %.1f s, other %.1f s",
        wall, r->times.startup_s, r->times.data_s, r->times.train_s, comm_exposed_s, r->times.eval_s,
        r->times.ckpt_total_s, other);
}

/* The largest peak resident set size of the ranks, in MiB (collective). */
static double peak_rss_mib(const run *r)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        die(EX_OSERR, "getrusage: cannot read this process's peak memory");
    double mib = (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
    const char *option;
    double timeout = wait_deadline(r, &option);
    comm_allreduce_within(&mib, 1, COMM_MAX, timeout, option, "peak memory", r->step);
    /* To the 0.1 MiB the metrics print: the summary line then rounds the same number the JSON holds. */
    return round(mib * 10.0) / 10.0;
}

/* Collective: rank 0's phases name the rows; another rank's seconds go to the row of the same name (0 if it
 * has none). One more value after the phases: the training time. */
static void gather_profile(double train_s, profile_table *t)
{
    profile_snapshot(t);
    world_bcast(&t->n, sizeof t->n, 0);
    world_bcast(t->name, sizeof t->name, 0);
    world_bcast(t->training, sizeof t->training, 0);
    double max[PROFILE_MAX_PHASES + 1], sum[PROFILE_MAX_PHASES + 1];
    for (int i = 0; i < t->n; i++)
        max[i] = sum[i] = profile_seconds(t->name[i]);
    max[t->n] = sum[t->n] = train_s;
    world_max_doubles(max, t->n + 1);
    world_sum_doubles(sum, t->n + 1);
    t->ranks = world_size();
    for (int i = 0; i < t->n; i++) {
        t->max[i] = max[i];
        t->mean[i] = sum[i] / t->ranks;
    }
    t->train_max = max[t->n];
    t->train_mean = sum[t->n] / t->ranks;
}

/* --profile: the phases outside the training loop join the laps; the table over all ranks is printed and
 * written as a JSON member (",\"profile\":{...}") into json; without --profile json is "". */
static void report_profile(const run *r, char *json, size_t len)
{
    *json = 0;
    if (!r->o->profile)
        return;
    profile_record("start-up", r->times.startup_s);
    profile_record("data load", r->times.data_s);
    profile_record("evaluation", r->times.eval_s);
    profile_record("checkpoint writes", r->times.ckpt_total_s);
    profile_table t;
    gather_profile(r->times.train_s, &t);
    profile_print(&t);
    int at = snprintf(json, len, ",\"profile\":");
    profile_json(&t, json + at, len - (size_t)at);
}

void run_summary(run *r, const eval_result *ev, int epochs, double total_s)
{
    const options *o = r->o;
    int world = r->env->world;
    sync_and_check(r, "at the end");
    uint64_t fingerprint = buffer_fingerprint(r->host_params, model_num_params(r->m));
    comm_stats cs = r->cb->stats(r->comm);
    double exposed = comm_exposed_per_step(&cs), skew = cs.reductions ? cs.skew_s / (double)cs.reductions : 0;
    double hidden = comm_hidden_fraction(exposed - skew, cs.blocking_s);
    double ips = r->times.train_s > 0 ? r->times.images / r->times.train_s : 0, rss = peak_rss_mib(r);
    double early = cs.reductions ? (double)cs.early / (double)cs.reductions : 0.0;
    char thread[96] = "", late[80] = "";
    if (cs.progress)
        snprintf(thread, sizeof thread, "; %.0f%% complete before backward ended (progress thread)", 100 * early);
    if (cs.shm)
        snprintf(late, sizeof late, ", %.2f ms of it waiting for the last rank's backward", 1e3 * skew);
    if (world > 1 || cs.reductions)
        say("all-reduce: %.2f ms blocking for %.1f MB (%s%s), %.2f ms exposed per step in %d bucket%s%s: %.0f%% "
            "hidden behind backward%s",
            1e3 * cs.blocking_s, (o->grad_comm == GRAD_COMM_BF16 ? 2e-6 : 4e-6) * (double)model_num_params(r->m),
            grad_comm_names[o->grad_comm], cs.shm ? " in shared memory" : "", 1e3 * exposed, cs.buckets,
            cs.buckets == 1 ? "" : "s", late, 100 * hidden, thread);
    report_time(r, cs.exposed_s);
    double per = r->times.counted_steps ? 1.0 / (double)r->times.counted_steps : 0.0,
           kps = per * (double)r->times.step_counts.kernels, gps = per * (double)r->times.step_counts.gemms,
           wps = per * (double)r->times.step_counts.waits;
    if (r->be->counts)
        say("device work per step: %.1f kernel launches, %.1f GEMMs, %.3f host waits; %ld steps replayed as a CUDA "
            "graph (%ld captures)",
            kps, gps, wps, step_graph_launches(r->graph), step_graph_captures(r->graph));
    static char prof[8192];
    report_profile(r, prof, sizeof prof);
    say("summary: test accuracy %.2f%%, %d epoch%s, %ld step%s, train %.1f s, total %.1f s, %.0f images/s, %d rank%s, "
        "peak memory %.0f MiB per rank",
        100 * ev->accuracy, epochs, epochs == 1 ? "" : "s", r->step, r->step == 1 ? "" : "s", r->times.train_s, total_s,
        ips, world, world == 1 ? "" : "s", rss);
    metrics("{\"type\":\"summary\",\"model\":\"%s\",\"device\":\"%s\",\"world\":%d,\"epochs\":%d,\"steps\":%ld,"
            "\"test_accuracy\":%.6f,\"test_loss\":%.6f,\"train_s\":%.3f,\"total_s\":%.3f,\"images_per_s\":%.1f,"
            "\"allreduce_blocking_ms\":%.3f,\"allreduce_exposed_ms\":%.3f,\"allreduce_skew_ms\":%.3f,"
            "\"allreduce_hidden\":%.3f,\"allreduce_early\":%.3f,"
            "\"startup_s\":%.3f,\"data_s\":%.3f,\"eval_s\":%.3f,\"checkpoint_s\":%.3f,\"comm_exposed_s\":%.3f,"
            "\"wall_s\":%.3f,\"kernels_per_step\":%.2f,\"gemms_per_step\":%.2f,\"host_waits_per_step\":%.4f,"
            "\"graph_steps\":%ld,\"graph_captures\":%ld,\"peak_rss_mib\":%.1f,\"model_mib\":%.1f,"
            "\"fingerprint\":\"%016llx\"%s}",
            model_name(r->m), r->be->name, world, epochs, r->step, ev->accuracy, ev->loss, r->times.train_s, total_s,
            ips, 1e3 * cs.blocking_s, 1e3 * exposed, 1e3 * skew, hidden, early, r->times.startup_s, r->times.data_s,
            r->times.eval_s, r->times.ckpt_total_s, cs.exposed_s, clock_now() - r->env->start_s, kps, gps, wps,
            step_graph_launches(r->graph), step_graph_captures(r->graph), rss,
            (double)model_backend_bytes(r->m) / 1048576.0, (unsigned long long)fingerprint, prof);
    if (o->verbose)
        say("replica fingerprint %016llx", (unsigned long long)fingerprint);
    if (o->save_model && world_rank() == 0) {
        model_file_save(o->save_model, r->m, epochs, ev->accuracy);
        say("model saved to %s", o->save_model);
    }
}

void report_run(const run *r, uint64_t steps_per_epoch)
{
    char settings[TS_MAX_SETTINGS * (TS_VALUE_LEN + 40)] = "";
    size_t n = 0;
    const checkpoint_identity *id = &r->ckpt.id;
    /* Names and values are the program's own words, numbers and hex digits: nothing to escape. */
    for (int i = 0; i < id->n && n < sizeof settings; i++)
        n += (size_t)snprintf(settings + n, sizeof settings - n, "%s\"%s\":\"%s\"", i ? "," : "", id->s[i].name,
                              id->s[i].value);
    metrics("{\"type\":\"run\",\"version\":\"%s\",\"started\":%lld,\"launcher\":\"%s\",\"host\":\"%s\",\"world\":%d,"
            "\"nodes\":%d,\"device\":\"%s\",\"epochs\":%d,\"steps_per_epoch\":%llu,\"max_steps\":%ld,"
            "\"start_step\":%ld,\"start_epoch\":%d,\"restarts\":%d,\"settings\":{%s}}",
            PACKAGE_VERSION, (long long)time(NULL), r->env->launcher, r->env->host, r->env->world, r->env->nodes,
            r->be->name, r->o->epochs, (unsigned long long)steps_per_epoch, r->o->max_steps, r->start.step,
            r->start.epoch, r->start.restarts, settings);
}
