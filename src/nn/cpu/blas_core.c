#include "nn/cpu/blas_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"

/* Set beside OPENBLAS_CORETYPE by the restart: the core OpenBLAS had chosen, for the start-up report. */
#define DETECTED_VAR "MNIST_DDP_OPENBLAS_DETECTED"

const char *blas_core_better(const char *core, int avx2_fma, int avx512)
{
    if (!core || strcmp(core, "Prescott") != 0) /* OpenBLAS's fallback on x86 when the model is unknown */
        return NULL;
    return avx512 ? "SkylakeX" : avx2_fma ? "Haswell" : NULL;
}

void blas_core_fix(char **argv)
{
    const char *set = getenv("OPENBLAS_CORETYPE");
    const char *core = openblas_get_corename();
    const char *better = blas_core_better(core, cpu_avx2_fma(), cpu_avx512());
    if ((set && *set) || !better)
        return;
    /* The file's own path, not /proc/self/exe: the process keeps its name (ps, pkill, Slurm's accounting). */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0 && setenv("OPENBLAS_CORETYPE", better, 1) == 0 && setenv(DETECTED_VAR, core, 1) == 0) {
        self[n] = '\0';
        execv(self, argv); /* returns only on failure */
    }
    warn("OpenBLAS took this CPU for a %s and runs its slow %s kernels; could not restart with OPENBLAS_CORETYPE=%s "
         "(set it before starting mnist_ddp)",
         core, core, better);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(DETECTED_VAR);
}

void blas_core_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename(), *detected = getenv(DETECTED_VAR);
    if (!core)
        snprintf(buf, len, "%s", "");
    else if (detected && *detected)
        snprintf(buf, len,
                 "OpenBLAS kernels: %s (OpenBLAS took this CPU for a %s: mnist_ddp set "
                 "OPENBLAS_CORETYPE=%s)",
                 core, detected, core);
    else
        snprintf(buf, len, "OpenBLAS kernels: %s", core);
}
