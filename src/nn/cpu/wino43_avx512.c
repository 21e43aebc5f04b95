/* wino43_v16.h's kernels for AVX-512. */
#include "nn/cpu/v16_avx512.h"
#define WINO43_VARIANT wino43_avx512
#include "nn/cpu/wino43_v16.h"
