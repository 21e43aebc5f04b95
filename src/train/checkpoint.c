#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "train/model_file.h"
#include "base/clock.h"
#include "comm/comm.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/run_lock.h"
#include "base/sha256.h"
#include "comm/world.h"

static const char state_format[] = "mnist_ddp train_state 1";
/* Paths are bounded (checkpoint_prepare_dir checks the directory's length), so messages built from them fit. */
enum { NAME_DIGITS = 12, PATH_LEN = 1024, WHY_LEN = 1024, MSG_LEN = 4096 };

void checkpoint_identity_add(checkpoint_identity *id, const char *name, const char *fmt, ...)
{
    if (id->n == TS_MAX_SETTINGS)
        die(EX_SOFTWARE, "checkpoint identity: more than %d settings", TS_MAX_SETTINGS);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(id->s[id->n].value, TS_VALUE_LEN, fmt, ap);
    va_end(ap);
    id->s[id->n].absent = NULL;
    id->s[id->n].hint = NULL;
    id->s[id->n++].name = name;
}

void checkpoint_identity_hint(checkpoint_identity *id, const char *hint) { id->s[id->n - 1].hint = hint; }

void checkpoint_identity_add_newer(checkpoint_identity *id, const char *name, const char *absent, const char *value)
{
    checkpoint_identity_add(id, name, "%s", value);
    id->s[id->n - 1].absent = absent;
}

/* The state on the host: what a file holds, in the model's and optimizer's flat layouts. */
typedef struct {
    float *params, *bufs, *opt;
    size_t np, nb, no;
    int parts;
    const char *const *part_names;
} host_state;

static host_state host_alloc(const model *m, const optim *opt)
{
    host_state h = {.np = model_num_params(m), .nb = model_buffer_size(m)};
    optim_state((optim *)opt, &h.no);
    h.parts = optim_state_parts(opt, &h.part_names);
    h.params = xmalloc(h.np * sizeof(float));
    h.bufs = xmalloc((h.nb + 1) * sizeof(float));
    h.opt = xmalloc((h.no + 1) * sizeof(float));
    return h;
}

static void host_free(host_state *h)
{
    free(h->params);
    free(h->bufs);
    free(h->opt);
}

/* SHA-256 over the tensors' bytes, the position and the identity: what loading verifies. */
static void digest(const host_state *h, const checkpoint_position *p, const checkpoint_identity *id,
                   char hex[SHA256_HEX_LEN + 1])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, h->params, h->np * sizeof(float));
    sha256_update(&c, h->bufs, h->nb * sizeof(float));
    sha256_update(&c, h->opt, h->no * sizeof(float));
    char line[TS_VALUE_LEN + 128];
    int n = snprintf(line, sizeof line, "%ld %d %ld %d\n", p->step, p->epoch, p->epoch_step, p->restarts);
    sha256_update(&c, line, (size_t)n);
    for (int i = 0; i < id->n; i++) {
        n = snprintf(line, sizeof line, "%s=%s\n", id->s[i].name, id->s[i].value);
        sha256_update(&c, line, (size_t)n);
    }
    sha256_final_hex(&c, hex);
}

static char *file_path(char *buf, size_t len, const char *dir, long step)
{
    snprintf(buf, len, "%s/ckpt-%0*ld.h5", dir, NAME_DIGITS, step);
    return buf;
}

/* The steps of DIR's checkpoint files, newest first; returns how many (*steps: malloc'd). */
static int list_checkpoints(const char *dir, long **steps)
{
    int n = 0, cap = 16;
    *steps = xmalloc((size_t)cap * sizeof **steps);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *s = e->d_name;
        if (strlen(s) != 5 + NAME_DIGITS + 3 || strncmp(s, "ckpt-", 5) != 0 || strcmp(s + 5 + NAME_DIGITS, ".h5"))
            continue;
        if (strspn(s + 5, "0123456789") != NAME_DIGITS)
            continue;
        if (n == cap)
            *steps = xrealloc(*steps, (size_t)(cap *= 2) * sizeof **steps);
        long v = strtol(s + 5, NULL, 10);
        int i = n++;
        for (; i > 0 && (*steps)[i - 1] < v; i--) /* insertion: newest first */
            (*steps)[i] = (*steps)[i - 1];
        (*steps)[i] = v;
    }
    if (d)
        closedir(d);
    return n;
}

/* One run per directory: two would each resume the other's newest checkpoint and rotate it away. Rank 0
 * holds the lock for the run's lifetime; every rank learns the verdict. */
static void lock_dir(const char *dir)
{
    struct {
        int rc;
        char holder[400];
    } v = {0};
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", dir, CHECKPOINT_LOCK);
    if (world_rank() == 0)
        v.rc = run_lock_take(path, v.holder, sizeof v.holder);
    world_verdict(&v, sizeof v);
    if (v.rc == RUN_LOCK_HELD)
        die_all(EX_CANTCREAT,
                "--checkpoint-dir %s is in use by another run (%s): two runs in one directory resume and "
                "delete each other's checkpoints; give this one its own --checkpoint-dir",
                dir, *v.holder ? v.holder : "its holder did not say who it is");
    if (v.rc == RUN_LOCK_NO_FILE)
        die_all(EX_CANTCREAT, "--checkpoint-dir %s: cannot write its lock file %s: %s", dir, CHECKPOINT_LOCK, v.holder);
    if (world_rank() != 0)
        return;
    if (v.rc == RUN_LOCK_UNAVAILABLE)
        warn("--checkpoint-dir %s: its file system does not lock files (%s): nothing stops a second run from "
             "using it at the same time",
             dir, v.holder);
    else if (*v.holder)
        warn("--checkpoint-dir %s: taking over from a run that ended without releasing it (%s): killed, "
             "aborted or its node failed",
             dir, v.holder);
}

void checkpoint_prepare_dir(const char *dir)
{
    if (strlen(dir) > PATH_LEN - 64)
        die_all(EX_USAGE, "--checkpoint-dir: a path of at most %d characters, please", PATH_LEN - 64);
    int err = 0;
    if (world_rank() == 0 && mkdir(dir, 0777) != 0 && errno != EEXIST)
        err = errno;
    world_verdict(&err, sizeof err);
    if (err)
        die_all(EX_CANTCREAT, "--checkpoint-dir %s: cannot create it: %s", dir, strerror(err));
    char probe[PATH_LEN];
    model_file_check_writable("--checkpoint-dir", dir, file_path(probe, sizeof probe, dir, 0));
    lock_dir(dir);
    if (world_rank() == 0) {
        snprintf(probe, sizeof probe, "%s/ckpt-", dir);
        af_remove_stale(probe);
    }
}

static int write_long(hid_t loc, const char *name, long v)
{
    return model_file_write_attr(loc, name, H5T_NATIVE_LONG, &v);
}

/* The optimizer group: one subgroup per state part, a tensor per parameter. Returns 0, or EIO. */
static int write_optimizer(hid_t f, const model *m, const host_state *h)
{
    hid_t g = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = g < 0;
    for (int k = 0; k < h->parts && !bad; k++) {
        hid_t part = H5Gcreate2(g, h->part_names[k], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        bad = part < 0;
        for (int i = 0; i < model_num_tensors(m) && !bad; i++)
            bad = model_file_write_tensor(part, model_tensor(m, i), h->opt + (size_t)k * h->np);
        if (part >= 0)
            H5Gclose(part);
    }
    if (g >= 0)
        H5Gclose(g);
    return bad ? EIO : 0;
}

/* What a checkpoint file holds, for fill_file. */
typedef struct {
    const model *m;
    const host_state *h;
    const checkpoint_position *p;
    const checkpoint_identity *id;
} state_file;

/* The attributes after the tensors: format, position, identity and the digest over all of it. */
static int write_attrs(hid_t f, const state_file *s)
{
    char hex[SHA256_HEX_LEN + 1], name[64];
    digest(s->h, s->p, s->id, hex);
    int bad = model_file_write_string_attr(f, "format", model_file_format) ||
              model_file_write_string_attr(f, "model", model_name(s->m)) ||
              model_file_write_string_attr(f, "model_file_format", state_format) ||
              write_long(f, "global_step", s->p->step) || write_long(f, "epoch", s->p->epoch) ||
              write_long(f, "epoch_step", s->p->epoch_step) || write_long(f, "restarts", s->p->restarts);
    for (int i = 0; i < s->id->n && !bad; i++)
        bad = model_file_write_string_attr(f, strcat(strcpy(name, "setting."), s->id->s[i].name), s->id->s[i].value);
    return bad || model_file_write_string_attr(f, "sha256", hex) ? EIO : 0;
}

static int fill_file(hid_t f, const void *arg)
{
    const state_file *s = arg;
    int bad = 0;
    for (int i = 0; i < model_num_tensors(s->m) && !bad; i++)
        bad = model_file_write_tensor(f, model_tensor(s->m, i), s->h->params);
    for (int i = 0; i < model_num_buffers(s->m) && !bad; i++)
        bad = model_file_write_tensor(f, model_buffer(s->m, i), s->h->bufs);
    return bad || write_optimizer(f, s->m, s->h) || write_attrs(f, s) ? EIO : 0;
}

/* Rank 0: the file written and renamed into place durably (model_file_write_sealed); then the oldest
 * beyond keep removed. Dies 74 on any failure (nothing left behind, older checkpoints intact). */
static void write_durably(const checkpoint_config *c, const model *m, const host_state *h, const checkpoint_position *p)
{
    char path[PATH_LEN];
    state_file s = {m, h, p, &c->id};
    int err = model_file_write_sealed(file_path(path, sizeof path, c->dir, p->step), fill_file, &s);
    if (err)
        die(EX_IOERR, "--checkpoint-dir %s: writing checkpoint '%s' failed: %s", c->dir, path, strerror(err));
    long *steps;
    int n = list_checkpoints(c->dir, &steps);
    for (int i = c->keep; i < n; i++)
        if (unlink(file_path(path, sizeof path, c->dir, steps[i])) != 0)
            warn("--checkpoint-dir %s: cannot remove old checkpoint '%s': %s", c->dir, path, strerror(errno));
    free(steps);
}

void checkpoint_save(const checkpoint_config *c, model *m, optim *opt, const checkpoint_position *p)
{
    double t0 = clock_now();
    host_state h = host_alloc(m, opt);
    size_t count;
    model_download(m, h.params, h.bufs);
    /* BatchNorm statistics differ per rank inside an epoch; their mean is what the run ends with. */
    if (h.nb)
        comm_average(h.bufs, h.nb);
    if (world_rank() == 0) {
        model_backend(m)->download(h.opt, optim_state(opt, &count), h.no * sizeof(float));
        write_durably(c, m, &h, p);
    }
    host_free(&h);
    /* The other ranks wait here, so the job goes on only with the checkpoint in place; a rank 0 that
     * froze in the write must not hang them. */
    double done = 0;
    comm_allreduce_within(&done, 1, COMM_SUM, c->timeout_s, "--comm-timeout", "checkpoint write", p->step);
    char path[PATH_LEN];
    say("checkpoint: step %ld (epoch %d, step %ld of it) written to %s in %.3f s", p->step, p->epoch, p->epoch_step,
        file_path(path, sizeof path, c->dir, p->step), clock_now() - t0);
}

/* LOAD_FORMAT: intact, but of a format this version does not resume (an unsealed checkpoint). */
enum { LOAD_OK, LOAD_CORRUPT, LOAD_MISMATCH, LOAD_FORMAT };

static int read_long(hid_t loc, const char *name, long *v)
{
    if (H5Aexists(loc, name) <= 0)
        return ENOENT;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Aread(a, H5T_NATIVE_LONG, v);
    if (a >= 0)
        H5Aclose(a);
    return rc < 0 ? EIO : 0;
}

/* The position attributes; 0, or ENOENT when one is missing (EIO: unreadable). */
static int read_position(hid_t f, checkpoint_position *p)
{
    long epoch, restarts;
    if (read_long(f, "global_step", &p->step) || read_long(f, "epoch", &epoch) ||
        read_long(f, "epoch_step", &p->epoch_step) || read_long(f, "restarts", &restarts))
        return ENOENT;
    p->epoch = (int)epoch;
    p->restarts = (int)restarts;
    return 0;
}

/* A setting's value as a reader takes it: a number stored with all 17 digits (0.00020000000000000001) in
 * fewer where those still tell it from the other value (0.0002 against 0.0001); anything else as it is. */
static const char *shown(const char *v, char *buf, size_t len, const char *other)
{
    char *end, *oend;
    double a = strtod(v, &end), b = strtod(other, &oend);
    if (end == v || *end || oend == other || *oend)
        return v;
    char mine[32], theirs[32];
    for (int digits = 6; digits < 17; digits++) {
        snprintf(mine, sizeof mine, "%.*g", digits, a);
        snprintf(theirs, sizeof theirs, "%.*g", digits, b);
        if (strcmp(mine, theirs) != 0 && strlen(mine) < len) {
            strcpy(buf, mine);
            return buf;
        }
    }
    return v;
}

/* The file's identity against id; why gets the first setting that differs from id (LOAD_MISMATCH). held gets
 * the settings the file has: its writer's digest covered those only, not the newer ones it lacks. */
static int read_identity(hid_t f, const checkpoint_identity *id, checkpoint_identity *held, char *why, size_t len)
{
    int rc = LOAD_OK;
    char name[64];
    held->n = 0;
    for (int i = 0; i < id->n; i++) {
        char *v = model_file_read_string_attr(f, strcat(strcpy(name, "setting."), id->s[i].name));
        if (v)
            held->s[held->n++] = id->s[i];
        else if (id->s[i].absent)
            v = xstrdup(id->s[i].absent);
        if (!v) {
            snprintf(why, len, "setting '%s' is missing", id->s[i].name);
            return LOAD_CORRUPT;
        }
        if (rc == LOAD_OK && strcmp(v, id->s[i].value) != 0) {
            char file[32], here[32];
            int n = snprintf(why, len, "it was written with %s %s, this run has %s %s", id->s[i].name,
                             shown(v, file, sizeof file, id->s[i].value), id->s[i].name,
                             shown(id->s[i].value, here, sizeof here, v));
            if (id->s[i].hint && n > 0 && (size_t)n < len)
                snprintf(why + n, len - (size_t)n, "; %s", id->s[i].hint);
            rc = LOAD_MISMATCH;
        }
        free(v);
    }
    return rc;
}

/* Every tensor into h; 0, or an errno value with why said. */
static int read_tensors(hid_t f, const model *m, host_state *h, char *why, size_t len)
{
    int err = 0;
    for (int i = 0; i < model_num_tensors(m) && !err; i++)
        if ((err = model_file_read_tensor(f, model_tensor(m, i), h->params)))
            snprintf(why, len, "tensor '%s' %s", model_tensor(m, i)->name, model_file_problem(err));
    for (int i = 0; i < model_num_buffers(m) && !err; i++)
        if ((err = model_file_read_tensor(f, model_buffer(m, i), h->bufs)))
            snprintf(why, len, "tensor '%s' %s", model_buffer(m, i)->name, model_file_problem(err));
    for (int k = 0; k < h->parts && !err; k++) {
        char group[128];
        snprintf(group, sizeof group, "optimizer/%s", h->part_names[k]);
        hid_t g = H5Lexists(f, "optimizer", H5P_DEFAULT) > 0 && H5Lexists(f, group, H5P_DEFAULT) > 0
                      ? H5Gopen2(f, group, H5P_DEFAULT)
                      : -1;
        if (g < 0) {
            snprintf(why, len, "optimizer state '%s' is missing", h->part_names[k]);
            return ENOENT;
        }
        for (int i = 0; i < model_num_tensors(m) && !err; i++)
            if ((err = model_file_read_tensor(g, model_tensor(m, i), h->opt + (size_t)k * h->np)))
                snprintf(why, len, "optimizer tensor '%s/%s' %s", group, model_tensor(m, i)->name,
                         model_file_problem(err));
        H5Gclose(g);
    }
    return err;
}

/* Reads and verifies path into h and *p: LOAD_OK, LOAD_CORRUPT or LOAD_MISMATCH with why. A file of another
 * identity is a mismatch even when its tensors do not fit this model. */
static int load_file(const char *path, const checkpoint_config *c, const model *m, host_state *h,
                     checkpoint_position *p, char *why, size_t len)
{
    /* HDF5 must not parse a file the seal has not checked. Unsealed ones are earlier versions' checkpoints or
     * other tools' rewrites: refused as a format, not as damage. */
    int sealed = af_verify(path, why, len);
    if (sealed != AF_SEALED) {
        if (sealed != AF_UNSEALED)
            return LOAD_CORRUPT;
        snprintf(why, len,
                 "no mnist_ddp checksum header: checkpoint format '%s' unsealed, as mnist_ddp wrote it before "
                 "seal format 1 (or a file rewritten by another tool); this version resumes sealed checkpoints only",
                 state_format);
        return LOAD_FORMAT;
    }
    hid_t f = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) {
        snprintf(why, len, "not a readable HDF5 file");
        return LOAD_CORRUPT;
    }
    /* The first sealed checkpoints name the format attribute "checkpoint_format" (tests/fixtures). */
    char *fmt = model_file_read_string_attr(f, "model_file_format"), *sum = model_file_read_string_attr(f, "sha256");
    if (!fmt)
        fmt = model_file_read_string_attr(f, "checkpoint_format");
    checkpoint_identity held;
    int rc = LOAD_CORRUPT;
    if (!fmt || strcmp(fmt, state_format) != 0 || !sum)
        snprintf(why, len, "not a mnist_ddp checkpoint (no '%s' format attribute and checksum)", state_format);
    else if (read_position(f, p) != 0)
        snprintf(why, len, "its position attributes are missing");
    else if ((rc = read_identity(f, &c->id, &held, why, len)) == LOAD_OK) {
        char hex[SHA256_HEX_LEN + 1];
        if (read_tensors(f, m, h, why, len))
            rc = LOAD_CORRUPT;
        else if (digest(h, p, &held, hex), strcmp(hex, sum) != 0) {
            snprintf(why, len, "checksum mismatch: the file says %.12s..., its content hashes to %.12s...", sum, hex);
            rc = LOAD_CORRUPT;
        }
    }
    free(fmt);
    free(sum);
    H5Fclose(f);
    return rc;
}

/* Rank 0's choice, shared with every rank: code 0 scratch, 1 resume, else the exit status of msg. */
typedef struct {
    int code;
    checkpoint_position pos;
    char msg[MSG_LEN];
} decision;

/* The newest valid checkpoint of c->dir into h (rank 0); corrupt ones are skipped with a warning. */
static decision choose_in_dir(const checkpoint_config *c, const model *m, host_state *h)
{
    decision d = {0};
    long *steps;
    int n = list_checkpoints(c->dir, &steps);
    char path[PATH_LEN], why[WHY_LEN], skipped[MSG_LEN / 2] = "";
    for (int i = 0; i < n && d.code == 0; i++) {
        int rc = load_file(file_path(path, sizeof path, c->dir, steps[i]), c, m, h, &d.pos, why, sizeof why);
        if (rc == LOAD_OK) {
            d.code = 1;
            snprintf(d.msg, sizeof d.msg, "%s", path);
        } else if (rc != LOAD_CORRUPT) {
            d.code = EX_DATAERR;
            snprintf(d.msg, sizeof d.msg,
                     "--checkpoint-dir %s: %s: %s (%suse another --checkpoint-dir, or --resume never)", c->dir, path,
                     why, rc == LOAD_MISMATCH ? "another run's checkpoint: " : "");
        } else {
            warn("skipping corrupt checkpoint %s: %s", path, why);
            size_t used = strlen(skipped);
            snprintf(skipped + used, sizeof skipped - used, "%s%s", used ? ", " : "", path);
        }
    }
    free(steps);
    if (d.code == 0 && n > 0) {
        d.code = EX_DATAERR;
        snprintf(d.msg, sizeof d.msg, "--checkpoint-dir %s: no valid checkpoint among %s", c->dir, skipped);
    } else if (d.code == 0) {
        snprintf(d.msg, sizeof d.msg, "resume: no checkpoint in %s, starting from scratch", c->dir);
    }
    return d;
}

/* A new directory DIR/superseded-<UTC time>[-k] into aside; 0, or an errno value. */
static int make_aside(const char *dir, char *aside, size_t len)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
    for (int k = 0; k < 100; k++) {
        snprintf(aside, len, k ? "%s/superseded-%s-%d" : "%s/superseded-%s", dir, stamp, k);
        if (mkdir(aside, 0777) == 0)
            return 0;
        if (errno != EEXIST)
            return errno;
    }
    return EEXIST;
}

/* --resume never where DIR holds checkpoints (another run's, or an earlier start's): left in place, rotation
 * would keep their higher step numbers over this run's files and a requeue would resume them. They are moved,
 * not deleted, into a directory of their own. */
static void set_aside(const char *dir, decision *d)
{
    long *steps;
    int n = list_checkpoints(dir, &steps), err = 0;
    char aside[PATH_LEN], from[PATH_LEN], to[PATH_LEN + 32];
    const char *never = "--resume never";
    if (n > 0 && (err = make_aside(dir, aside, sizeof aside)) != 0)
        snprintf(d->msg, sizeof d->msg, "--checkpoint-dir %s: %s: cannot create '%s' to move %d checkpoint%s into: %s",
                 dir, never, aside, n, n == 1 ? "" : "s", strerror(err));
    for (int i = 0; i < n && !err; i++)
        if (rename(file_path(from, sizeof from, dir, steps[i]), file_path(to, sizeof to, aside, steps[i])) != 0)
            snprintf(d->msg, sizeof d->msg, "--checkpoint-dir %s: %s: cannot move '%s' to '%s': %s", dir, never, from,
                     to, strerror(err = errno));
    if (n > 0 && !err && ((err = af_sync_dir(aside)) != 0 || (err = af_sync_dir(dir)) != 0))
        snprintf(d->msg, sizeof d->msg, "--checkpoint-dir %s: %s: cannot sync the moves: %s", dir, never,
                 strerror(err));
    if (n == 0)
        snprintf(d->msg, sizeof d->msg, "resume: %s, starting from scratch", never);
    else if (!err)
        snprintf(d->msg, sizeof d->msg,
                 "resume: %s: the %d checkpoint%s in %s (the newest of step %ld) moved to %s; starting from scratch",
                 never, n, n == 1 ? "" : "s", dir, steps[0], aside);
    d->code = err ? EX_IOERR : 0;
    free(steps);
}

static decision choose(const checkpoint_config *c, const model *m, host_state *h)
{
    decision d = {0};
    char why[WHY_LEN];
    if (strcmp(c->resume, "auto") == 0)
        return c->dir ? choose_in_dir(c, m, h) : d;
    if (strcmp(c->resume, "never") == 0) {
        if (c->dir)
            set_aside(c->dir, &d);
    } else if (access(c->resume, R_OK) != 0) {
        d.code = EX_NOINPUT;
        snprintf(d.msg, sizeof d.msg, "--resume %s: %s", c->resume, strerror(errno));
    } else if (load_file(c->resume, c, m, h, &d.pos, why, sizeof why) != LOAD_OK) {
        d.code = EX_DATAERR;
        snprintf(d.msg, sizeof d.msg, "--resume %s: %s", c->resume, why);
    } else {
        d.code = 1;
        snprintf(d.msg, sizeof d.msg, "%s", c->resume);
    }
    return d;
}

int checkpoint_resume(const checkpoint_config *c, model *m, optim *opt, checkpoint_position *pos)
{
    decision d = {0};
    if (world_rank() == 0) {
        host_state h = host_alloc(m, opt);
        d = choose(c, m, &h);
        if (d.code == 1) {
            size_t count;
            model_upload(m, h.params, h.bufs);
            model_backend(m)->upload(optim_state(opt, &count), h.opt, h.no * sizeof(float));
            d.pos.restarts++;
        }
        host_free(&h);
    }
    world_verdict(&d, sizeof d);
    if (d.code > 1)
        die_all(d.code, "%s", d.msg);
    if (d.code == 1)
        say("resumed from step %ld (restart %d): %s, epoch %d after %ld of its steps", d.pos.step, d.pos.restarts,
            d.msg, d.pos.epoch, d.pos.epoch_step);
    else if (d.msg[0])
        say("%s", d.msg);
    *pos = d.pos;
    return d.code == 1;
}
