/* The stopwatch of --profile on a device whose work the host only queues (the GPU path): profile.c hands each
 * lap and mark to it instead of reading the host's clock, and it hands the device's times back later with
 * profile_add. MPI-free, so nvcc compiles its implementation (src/gpu/cuda/device.cu). */
#ifndef MNIST_PROFILE_CLOCK_H
#define MNIST_PROFILE_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct profile_clock {
    void (*lap)(int phase); /* the time from the previous lap or mark to now will go to phase (an index) */
    void (*mark)(void);     /* the time from the previous lap or mark to now goes nowhere */
    void (*flush)(void);    /* waits for the device: every lap's time has been added when it returns */
    void (*hold)(void);     /* at a step's start (NULL: nothing): the device idles until the host has queued the
                               step, then runs it back to back, so laps time its work, not the host's launches;
                               the hold's own time goes nowhere, like a mark's */
    const char *about;      /* one line for the table: what the times are */
    const char *name;       /* the same in one word, for the --metrics summary */
} profile_clock;

/* For a clock: seconds of device time to the phase its lap was given. */
void profile_add(int phase, double seconds);

#ifdef __cplusplus
}
#endif
#endif
