/* The collective side of the GPU path (compiled by the MPI C compiler, GPU build only): agreement on the
 * device choice, the per-node duplicate-GPU check, the start-up table, and the NCCL bootstrap (address
 * check, unique ID broadcast). The CUDA/NCCL calls themselves live in device.cu and nccl_comm.cu, which
 * never include mpi.h (nvcc is not the MPI wrapper and would not find it). */
#define _POSIX_C_SOURCE 200809L /* setenv under a strict -std=c11 too */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "base/log.h"
#include "comm/world.h"

/* The lowest world rank for which bad is set, INT_MAX when none: every rank learns the same one. */
static int first_rank_where(int bad)
{
    int first = bad ? world_rank() : INT_MAX;
    world_min_ints(&first, 1);
    return first;
}

int gpu_decide(const ddp_env *env, int want_cuda)
{
    char why[GPU_MSG_LEN], line[GPU_MSG_LEN + 320];
    int ok = gpu_available(why, sizeof why), total_missing = !ok;
    int first = first_rank_where(!ok);
    if (first == INT_MAX)
        return 1;
    world_sum_ints(&total_missing, 1);
    if (world_rank() == first) {
        if (total_missing > 1)
            snprintf(line, sizeof line, "rank %d on %s (and %d other rank%s): %s", world_rank(), env->host,
                     total_missing - 1, total_missing == 2 ? "" : "s", why);
        else
            snprintf(line, sizeof line, "rank %d on %s: %s", world_rank(), env->host, why);
    }
    world_bcast(line, sizeof line, first);
    if (want_cuda)
        die_all(EX_UNAVAILABLE, "--device cuda: no usable GPU on %s (or run with --device cpu)", line);
    say("device auto: no usable GPU on %s; training on the CPU", line);
    return 0;
}

/* The device bound before MPI_Init by gpu_choose_early must be the one MPI's node-local rank chooses: else
 * the launcher numbered the ranks of a node differently from MPI, and a CUDA-aware MPI set up this rank's
 * context on another rank's GPU. Stops every rank (78) with the first such rank's line. */
static void check_early_device(const ddp_env *env, const gpu_info *info)
{
    const char *var;
    long local;
    int early = gpu_early_device(&var, &local);
    int first = first_rank_where(early >= 0 && early != info->device);
    if (first == INT_MAX)
        return;
    char line[GPU_MSG_LEN];
    if (world_rank() == first)
        snprintf(line, sizeof line,
                 "rank %d on %s: %s=%ld chose GPU %d before MPI_Init, but its node-local MPI rank "
                 "%d chooses GPU %d: the launcher and MPI number the ranks of a node differently (a wrapper script "
                 "changing %s? mixed MPI installations?); launch with 'srun --mpi=pmix' or 'mpirun' directly",
                 world_rank(), env->host, var, local, early, env->local_rank, info->device, var);
    world_bcast(line, sizeof line, first);
    die_all(EX_CONFIG, "%s", line);
}

gpu_node_verdict gpu_select_try(const ddp_env *env, gpu_info *info, char *why, size_t len)
{
    char msg[GPU_MSG_LEN];
    if (gpu_probe(env->local_rank, info, msg, sizeof msg) != 0)
        die(EX_UNAVAILABLE, "no usable GPU: %s (gpu_decide() decides between GPU and CPU first)", msg);
    check_early_device(env, info);

    gpu_slot mine;
    memset(&mine, 0, sizeof mine);
    mine.rank = world_rank();
    mine.local_rank = env->local_rank;
    mine.visible = info->visible;
    mine.device = info->device;
    snprintf(mine.bus_id, sizeof mine.bus_id, "%s", info->pci_bus_id);
    snprintf(mine.visible_devices, sizeof mine.visible_devices, "%s", info->visible_devices);
    gpu_slot *all = xmalloc((size_t)env->local_size * sizeof *all);
    world_allgather_on(env->local, &mine, all, sizeof mine);
    gpu_node_verdict v = gpu_plan_check_node(all, env->local_size, env->host, msg, sizeof msg);
    free(all);

    /* Every rank of a bad node reached the same verdict; its local rank 0 speaks for it. */
    int first = first_rank_where(v != GPU_NODE_OK && env->local_rank == 0);
    if (first == INT_MAX) {
        gpu_bind(info);
        if (why && len)
            why[0] = '\0';
        return GPU_NODE_OK;
    }
    struct {
        int verdict;
        char msg[GPU_MSG_LEN];
    } out;
    memset(&out, 0, sizeof out);
    if (world_rank() == first) {
        out.verdict = (int)v;
        snprintf(out.msg, sizeof out.msg, "%s", msg);
    }
    world_bcast(&out, sizeof out, first);
    if (why && len)
        snprintf(why, len, "%s", out.msg);
    return (gpu_node_verdict)out.verdict;
}

void gpu_select(const ddp_env *env, gpu_info *info)
{
    char why[GPU_MSG_LEN];
    if (gpu_select_try(env, info, why, sizeof why) != GPU_NODE_OK)
        die_all(EX_CONFIG, "%s", why);
}

void gpu_report(const ddp_env *env, const gpu_info *info)
{
    enum { LINE = 400 };
    char line[LINE], drv[16], rt[16], nccl[24];
    gpu_plan_cuda_version_string(info->driver_version, drv, sizeof drv);
    gpu_plan_cuda_version_string(info->runtime_version, rt, sizeof rt);
    gpu_plan_nccl_version_string(info->nccl_version, nccl, sizeof nccl);
    snprintf(line, sizeof line, "%6d  %-20.20s %4d  %-26.26s %-13.13s %-22.22s %-7s %-8s %s", world_rank(), env->host,
             info->device, info->name, info->pci_bus_id, info->visible_devices, drv, rt, nccl);
    char *all = world_rank() == 0 ? xmalloc((size_t)env->world * LINE) : NULL;
    world_gather(line, all, LINE);
    if (world_rank() == 0) {
        printf("%6s  %-20s %4s  %-26s %-13s %-22s %-7s %-8s %s\n", "rank", "host", "gpu", "name", "pci bus id",
               "CUDA_VISIBLE_DEVICES", "driver", "runtime", "nccl");
        for (int r = 0; r < env->world; r++)
            printf("%s\n", all + (size_t)r * LINE);
        fflush(stdout);
        free(all);
    }
}

/* Rank 0 checks that NCCL's bootstrap root will be able to listen on the address; every rank learns
 * the outcome, so a taken port stops the job at once instead of NCCL failing or waiting for the deadline. */
static void check_bootstrap_addr(const gpu_comm_id_plan *plan)
{
    struct {
        int code;
        char msg[GPU_MSG_LEN + 320];
    } r;
    memset(&r, 0, sizeof r);
    if (world_rank() == 0) {
        const char *src = plan->source == GPU_COMM_ID_ENV ? "NCCL_COMM_ID=" : "--bootstrap-addr ";
        char host[256], msg[GPU_MSG_LEN];
        const char *err = NULL;
        int port = 0;
        if (gpu_plan_parse_hostport(plan->addr, host, sizeof host, &port, &err) != 0) {
            r.code = plan->source == GPU_COMM_ID_ENV ? EX_CONFIG : EX_USAGE;
            snprintf(r.msg, sizeof r.msg, "%s%s: %s", src, plan->addr, err);
        } else {
            int e = gpu_plan_probe_port(host, port, msg, sizeof msg);
            if (e) {
                r.code = e == EADDRINUSE ? EX_UNAVAILABLE : EX_CONFIG;
                snprintf(r.msg, sizeof r.msg, "%s%s: %s", src, plan->addr, msg);
            }
        }
    }
    world_verdict(&r, sizeof r);
    if (r.code)
        die_all(r.code, "%s", r.msg);
}

gpu_comm *gpu_comm_create(const ddp_env *env, const char *bootstrap_addr, double timeout_s)
{
    if (gpu_bound_device() < 0)
        die(EX_SOFTWARE, "gpu_comm_create: no device bound (gpu_select() comes first)");
    /* Before any NCCL call: NCCL reads NCCL_COMM_ID once, when it first initialises its bootstrap network. */
    gpu_comm_id_plan plan = gpu_plan_comm_id(bootstrap_addr, getenv("NCCL_COMM_ID"));
    char line[GPU_MSG_LEN];
    gpu_plan_comm_id_describe(&plan, bootstrap_addr, line, sizeof line);
    say("%s", line);
    if (plan.addr)
        check_bootstrap_addr(&plan);
    if (plan.source == GPU_COMM_ID_OPTION && setenv("NCCL_COMM_ID", plan.addr, 1) != 0)
        die(EX_OSERR, "cannot set NCCL_COMM_ID=%s: %s", plan.addr, strerror(errno));

    unsigned char id[GPU_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    if (world_rank() == 0)
        gpu_nccl_unique_id(id);
    world_bcast(id, GPU_NCCL_ID_BYTES, 0);
    double t = world_time();
    gpu_comm *c = gpu_comm_init(id, env->world, world_rank(), timeout_s);
    say("NCCL communicator: %d rank%s ready in %.2f s (non-blocking init, --comm-timeout %.0f s)", env->world,
        env->world == 1 ? "" : "s", world_time() - t, timeout_s);
    return c;
}

/* ---- The comm_nccl table: device buffers, NCCL over MPI_COMM_WORLD ------------------------------- */

typedef struct {
    gpu_comm *c;
    gpu_grad_comm *g;
} nccl_state;

static void *nccl_create(const ddp_env *env, const comm_config *cfg, float *grads, size_t n)
{
    nccl_state *s = xcalloc(1, sizeof *s);
    s->c = gpu_comm_create(env, cfg->bootstrap_addr, cfg->timeout_s);
    gpu_comm_set_step_timeout(s->c, cfg->step_timeout_s);
    if (cfg->alone && env->world == 1)
        gpu_comm_set_alone(s->c);
    if (cfg->proxy.bus_gbps > 0)
        gpu_comm_set_proxy(s->c, &cfg->proxy);
    s->g = gpu_grad_comm_create(s->c, grads, n, cfg->bucket_bytes);
    if (cfg->wire_bf16)
        gpu_grad_comm_set_wire_bf16(s->g);
    return s;
}

static void nccl_arm(void *state, int armed, long step) { gpu_grad_comm_arm(((nccl_state *)state)->g, armed, step); }
static void nccl_ready(void *state, size_t offset, size_t count)
{
    gpu_grad_comm_ready(((nccl_state *)state)->g, offset, count);
}
static void nccl_finish(void *state) { gpu_grad_comm_finish(((nccl_state *)state)->g); }
static void nccl_replayed(void *state, long step) { gpu_grad_comm_replayed(((nccl_state *)state)->g, step); }
static comm_stats nccl_stats(const void *state) { return gpu_grad_comm_get_stats(((const nccl_state *)state)->g); }

static void nccl_broadcast(void *state, float *p, size_t n, const char *what)
{
    gpu_comm_broadcast(((nccl_state *)state)->c, p, n, 0, what);
}

static void nccl_average(void *state, float *p, size_t n, const char *what)
{
    gpu_comm_average(((nccl_state *)state)->c, p, n, what);
}

static void nccl_destroy(void *state)
{
    nccl_state *s = state;
    gpu_grad_comm_free(s->g);
    gpu_comm_free(s->c);
    free(s);
}

static const comm_backend nccl_table = {
    .name = "nccl",
    .create = nccl_create,
    .arm = nccl_arm,
    .ready = nccl_ready,
    .finish = nccl_finish,
    .replayed = nccl_replayed,
    .stats = nccl_stats,
    .broadcast = nccl_broadcast,
    .average = nccl_average,
    .destroy = nccl_destroy,
};

const comm_backend *comm_nccl(void) { return &nccl_table; }
