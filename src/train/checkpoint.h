/* Training-state checkpoints: everything a run's trajectory depends on, so a stopped run resumes exactly.
 *
 * One HDF5 file per checkpoint, DIR/ckpt-<global step, 12 digits>.h5:
 *   /<state_dict name>          parameters and BatchNorm buffers, as --save-model writes them (so
 *                               --load-model and PyTorch read the model part unchanged); buffers are the
 *                               average over ranks, as at an epoch end
 *   /optimizer/<part>/<name>    the optimizer state per parameter, parts named as torch.optim names them
 *                               (Adadelta: square_avg, acc_delta; SGD with momentum: momentum_buffer)
 *   attributes                  format, model (as --save-model), model_file_format, global_step, epoch
 *                               (in progress, 1-based), epoch_step (its optimizer steps done), restarts,
 *                               setting.<name> (the run's identity, below) and sha256 over all of these
 *                               and the tensors' bytes.
 * Rank 0 writes it sealed through an atomic_file (temporary name in DIR, fsync, rename, fsync of DIR; a
 * checksum header checked before HDF5 parses the file); older files beyond --checkpoint-keep go only after
 * that. A file without the seal is not a checkpoint. The identity is what must match to resume: model, optimizer and
 * its hyper-parameters, global batch, seed, precision and the training set (samples, source checksum). */
#ifndef MNIST_CHECKPOINT_H
#define MNIST_CHECKPOINT_H
#include <stdarg.h>

#include "nn/model.h"
#include "nn/optim.h"

enum { TS_MAX_SETTINGS = 16, TS_VALUE_LEN = 96 };
typedef struct {
    int n;
    struct {
        const char *name;
        char value[TS_VALUE_LEN];
        const char *absent; /* what a file written before the setting existed had; NULL: required */
        const char *hint;   /* said after the values where a file's differs, or NULL */
    } s[TS_MAX_SETTINGS];
} checkpoint_identity;

/* Adds one setting, its value formatted by printf. */
void checkpoint_identity_add(checkpoint_identity *id, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* What a file whose value of the setting last added differs is told (the fix, where the difference is no other
 * run's). */
void checkpoint_identity_hint(checkpoint_identity *id, const char *hint);
/* A setting newer than the file format: a checkpoint without it was written with `absent`. */
void checkpoint_identity_add_newer(checkpoint_identity *id, const char *name, const char *absent, const char *value);

typedef struct {
    long step;       /* optimizer steps done */
    int epoch;       /* the epoch in progress, 1-based */
    long epoch_step; /* optimizer steps of that epoch done */
    int restarts;    /* how many times the run was resumed */
} checkpoint_position;

typedef struct {
    const char *dir;    /* NULL: no checkpoints */
    const char *resume; /* "auto", "never" or a checkpoint file */
    int keep;
    double timeout_s; /* how long the other ranks wait for rank 0's write (--comm-timeout) */
    checkpoint_identity id;
} checkpoint_config;

/* The lock file in a checkpoint directory: one run at a time (base/run_lock.h). */
#define CHECKPOINT_LOCK "mnist_ddp.lock"

/* Collective: creates DIR if missing and locks it for this run; stops the job (73) before any training when
 * it cannot take files or another run holds it. */
void checkpoint_prepare_dir(const char *dir);

/* Collective. Finds the checkpoint to start from (the named file, or the newest valid one in dir for "auto")
 * and says which in one line. Rank 0 loads it into m and opt (the others then take the state by broadcast);
 * *pos gets its position on every rank. Returns 1 when resuming, 0 when starting from scratch.
 * Stops the job with 65 for a checkpoint of another identity or when no checkpoint in dir is valid (a
 * corrupt one is skipped with a warning when an older one is valid), 66 for a missing file. */
int checkpoint_resume(const checkpoint_config *c, model *m, optim *opt, checkpoint_position *pos);

/* Collective (the buffers are averaged over ranks): rank 0 writes the checkpoint at pos and keeps the newest
 * c->keep. Says where and how long it took. */
void checkpoint_save(const checkpoint_config *c, model *m, optim *opt, const checkpoint_position *pos);
#endif
