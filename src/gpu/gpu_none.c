/* The GPU entry points in a CPU-only build (no CUDA): there is never a GPU. gpu_available() and
 * gpu_decide() say so; the others are stubs that main.c and train.c call only after gpu_decide() chose
 * the GPU, which it never does here, so reaching one is a bug. */

#include <stdio.h>

#include "nn/backend.h"
#include "comm/comm.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "base/log.h"

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

_Noreturn static void no_gpu_path(const char *fn) { die(EX_SOFTWARE, "%s called in a build without the GPU path", fn); }

void gpu_select(const ddp_env *env, gpu_info *info)
{
    (void)env, (void)info;
    no_gpu_path(__func__);
}

void gpu_describe(const gpu_info *info, char *buf, size_t len)
{
    (void)info, (void)buf, (void)len;
    no_gpu_path(__func__);
}

void gpu_report(const ddp_env *env, const gpu_info *info)
{
    (void)env, (void)info;
    no_gpu_path(__func__);
}

void gpu_blas_init(const char *precision)
{
    (void)precision;
    no_gpu_path(__func__);
}

void gpu_choose_early(void) {}
void gpu_blas_free(void) { no_gpu_path(__func__); }
void gpu_release(void) { no_gpu_path(__func__); }
const nn_backend *nn_cuda(unsigned switches)
{
    (void)switches;
    no_gpu_path(__func__);
}
double gpu_node_cost_s(int nodes, int replays)
{
    (void)nodes, (void)replays;
    no_gpu_path(__func__);
}

void gpu_profile_release(void) { no_gpu_path(__func__); }

const struct profile_clock *gpu_profile_clock(int graphs)
{
    (void)graphs;
    no_gpu_path(__func__);
}
const comm_backend *comm_nccl(void) { no_gpu_path(__func__); }
