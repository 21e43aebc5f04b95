/* wino43_v16.h's kernels for AVX2 (two registers per v16). */
#include "nn/cpu/v16_avx2.h"
#define WINO43_VARIANT wino43_avx2
#include "nn/cpu/wino43_v16.h"
