/* conv1_direct_v16.h's kernels for AVX2 (two registers per v16). */
#include "nn/cpu/v16_avx2.h"
#define CONV1_DIRECT_VARIANT conv1_direct_avx2
#include "nn/cpu/conv1_direct_v16.h"
