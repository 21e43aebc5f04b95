/* bfloat16: the upper half of an IEEE float (8 exponent bits, 7 mantissa bits), the gradient exchange's wire
 * format with --grad-comm bf16. Host and device (one copy of the rounding for the MPI and NCCL paths). */
#ifndef MNIST_BF16_H
#define MNIST_BF16_H
#include <stdint.h>
#include <string.h>

#include "base/host_device.h"

/* Rounded to nearest, ties to even; a NaN stays a (quiet) NaN, infinities stay infinite. */
HD static inline uint16_t bf16_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

HD static inline float float_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif
