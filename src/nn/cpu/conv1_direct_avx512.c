/* conv1_direct_v16.h's kernels for AVX-512. */
#include "nn/cpu/v16_avx512.h"
#define CONV1_DIRECT_VARIANT conv1_direct_avx512
#include "nn/cpu/conv1_direct_v16.h"
