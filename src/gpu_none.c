/* The device-choice entry points of gpu.h in a CPU-only build (no CUDA): there is never a GPU. */
#include "config.h"

#include <stdio.h>

#include "errors.h"
#include "gpu.h"
#include "log.h"

int gpu_available(char *why, size_t len)
{
    if (why && len)
        snprintf(why, len, "this build has no GPU path (configure --with-cuda and rebuild)");
    return 0;
}

int gpu_decide(const ddp_env *env, int want_cuda)
{
    (void)env;
    if (want_cuda)
        die_all(EX_UNAVAILABLE, "--device cuda: this build has no GPU path (configure --with-cuda and rebuild), "
                "or run with --device cpu");
    say("device auto: this build has no GPU path; training on the CPU");
    return 0;
}
