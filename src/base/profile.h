/* --profile: where a run's time goes, per named phase, on the host's monotonic clock (clock.h).
 *
 * One stopwatch per process: profile_lap(name) charges the time since the previous lap (or mark) to the
 * training phase name, so consecutive laps cover the training loop without gaps and add up to its time.
 * profile_mark() restarts the stopwatch where time must go nowhere (a checkpoint write, counted apart).
 * Phases outside the loop (start-up, evaluation...) are recorded whole by profile_record. Off (the default),
 * every call is one test of a flag: the model can call it per layer at no cost.
 *
 * Host clocks only time what the CPU does; on the GPU path they would time the queuing of kernels. So there
 * main.c hands laps and marks to a device clock (profile_use_clock: stamp kernels that a CUDA graph keeps, or
 * CUDA events with --cuda-graph off). Phases are listed in order of first use. */
#ifndef MNIST_PROFILE_H
#define MNIST_PROFILE_H
#include <stddef.h>

#include "base/profile_clock.h"

#ifdef __cplusplus
extern "C" { /* the CUDA translation units lap too (src/gpu/cuda/conv_pool.cu) */
#endif

#define PROFILE_MAX_PHASES 40
#define PROFILE_NAME_LEN   32 /* with its NUL */

extern int profile_active;

/* Laps and marks go to c from now on (NULL: the host's clock). Its stopwatch starts at a mark (the trainer
 * marks before each epoch's first step), not at profile_enable. */
void profile_use_clock(const profile_clock *c);
/* Starts (forgetting earlier phases) or stops profiling; the stopwatch starts now. */
void profile_enable(int on);
void profile_lap_on(const char *name);
void profile_mark_on(void);
/* name: a string that outlives the run (a literal). */
static inline void profile_lap(const char *name)
{
    if (profile_active)
        profile_lap_on(name);
}
static inline void profile_mark(void)
{
    if (profile_active)
        profile_mark_on();
}
/* At a step's start: the device clock's hold (profile_clock.h), nothing on the host's. */
void profile_hold_on(void);
static inline void profile_hold(void)
{
    if (profile_active)
        profile_hold_on();
}
/* seconds of a phase outside the training loop. */
void profile_record(const char *name, double seconds);

/* The phases of rank 0 with their maximum and mean over the ranks; training: the seconds the
 * trainer counts as training (its own clock), summed over phases like the laps. */
typedef struct {
    int n, ranks;
    char name[PROFILE_MAX_PHASES][PROFILE_NAME_LEN];
    int training[PROFILE_MAX_PHASES]; /* a lap of the training loop, else a recorded phase */
    double max[PROFILE_MAX_PHASES], mean[PROFILE_MAX_PHASES];
    double train_max, train_mean;
    const char *about, *clock; /* the clock's (profile_clock), NULL: the host's */
    int held;                  /* the clock holds each step (profile_clock.h): training time the phases miss */
} profile_table;

/* This rank's phases into t (names, kinds, the clock; no figures yet), a device clock flushed first; the
 * trainer fills in rank 0's rows with every rank's figures (train_report.c). */
void profile_snapshot(profile_table *t);
/* This rank's seconds in the phase of that name, 0 if it has none. */
double profile_seconds(const char *name);
/* Rank 0 prints the table (say()). */
void profile_print(const profile_table *t);
/* The table as a JSON object into buf (for the --metrics summary); returns buf. */
char *profile_json(const profile_table *t, char *buf, size_t len);
#ifdef __cplusplus
}
#endif
#endif
