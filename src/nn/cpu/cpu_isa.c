#include "nn/cpu/cpu_isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

cpu_isa cpu_isa_cap(const char *value)
{
    if (!value || !*value || !strncmp(value, "AVX512", 6) || !strcmp(value, "ALL") || !strcmp(value, "DEFAULT"))
        return CPU_ISA_AVX512;
    return !strncmp(value, "AVX2", 4) ? CPU_ISA_AVX2 : CPU_ISA_NONE;
}

static cpu_isa detect(void)
{
    __builtin_cpu_init();
    cpu_isa cpu = __builtin_cpu_supports("avx512f")                                 ? CPU_ISA_AVX512
                  : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? CPU_ISA_AVX2
                                                                                    : CPU_ISA_NONE;
    const char *v = getenv("ONEDNN_MAX_CPU_ISA");
    cpu_isa cap = cpu_isa_cap(v ? v : getenv("DNNL_MAX_CPU_ISA"));
    return cpu < cap ? cpu : cap;
}

cpu_isa cpu_isa_own(void)
{
    static atomic_int known = -1; /* kernels ask from several threads */
    int isa = atomic_load_explicit(&known, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)detect();
        atomic_store_explicit(&known, isa, memory_order_relaxed);
    }
    return (cpu_isa)isa;
}
