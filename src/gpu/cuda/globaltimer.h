// The GPU's nanosecond clock (%globaltimer), for the profile's stamps and the communication proxy's waits:
// the same clock on every SM, unlike clock64's cycles.
#ifndef MNIST_CUDA_GLOBALTIMER_H
#define MNIST_CUDA_GLOBALTIMER_H

__device__ static inline unsigned long long globaltimer_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
