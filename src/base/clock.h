/* Wall-clock seconds from a monotonic clock, for durations (step times, deadlines); C and CUDA C++. */
#ifndef MNIST_CLOCK_H
#define MNIST_CLOCK_H
#include <time.h>

static inline double clock_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Sleeps s seconds; a signal (status, preemption) does not cut it short. */
static inline void clock_sleep(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}
#endif
