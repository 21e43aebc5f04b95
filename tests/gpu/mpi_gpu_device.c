/* Device selection and duplicate-GPU detection on a GPU machine (2 ranks on one node, under mpirun).
 * Before CUDA starts, rank 1 is pinned by hand (CUDA_VISIBLE_DEVICES) to the GPU rank 0 takes anyway, so
 * both choose the same device: gpu_select_try() must stop the job with the duplicate named (bus ID,
 * the fix), identically on both ranks, and leave the device unbound. Exit 77 with a reason without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/bootstrap.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "base/log.h"

static ddp_env env;

/* Rank 0 prints "WORD: text", every rank leaves with code. */
static _Noreturn void leave(int code, const char *word, const char *text)
{
    if (world_rank() == 0)
        printf("%s: %s\n", word, text);
    bootstrap_finalize(&env);
    exit(code);
}

#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond))                                                   \
            die(EX_SOFTWARE, "check failed: " #cond ": " __VA_ARGS__); \
    } while (0)

int main(int argc, char **argv)
{
    error_set_program("mpi_gpu_device");
    bootstrap_init(&argc, &argv, &env);
    log_init(0, NULL);
    int pair = env.local_size == 2, all_pairs = 0; /* decided together: no rank may wait for one that left */
    MPI_CHECK(MPI_Allreduce(&pair, &all_pairs, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all_pairs)
        leave(77, "SKIP", "needs exactly 2 ranks per node (make check runs mpirun -np 2)");

    /* The first entry of rank 0's CUDA_VISIBLE_DEVICES (device 0 when unset): the GPU rank 0 takes. */
    char first[128] = "0";
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && *cvd) {
        size_t k = strcspn(cvd, ",");
        snprintf(first, sizeof first, "%.*s", (int)k, cvd);
    }
    if (env.local_rank == 1 && setenv("CUDA_VISIBLE_DEVICES", first, 1) != 0)
        die(EX_OSERR, "setenv CUDA_VISIBLE_DEVICES failed");

    char why[GPU_MSG_LEN];
    int ok = gpu_available(why, sizeof why), key = ok ? INT_MAX : world_rank(), first_bad = INT_MAX;
    MPI_CHECK(MPI_Allreduce(&key, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad != INT_MAX) { /* every rank skips; the first without a GPU says why, in one line */
        if (world_rank() == first_bad)
            printf("SKIP: rank %d on %s: no usable GPU: %s\n", world_rank(), env.host, why);
        bootstrap_finalize(&env);
        return 77;
    }

    gpu_info info;
    gpu_node_verdict v = gpu_select_try(&env, &info, why, sizeof why);

    /* What the check must say: the same visible set on both ranks is "more ranks than GPUs", different
     * sets choosing the same GPU is "shared". */
    char views[2][GPU_VISIBLE_LEN], bus0[GPU_BUS_ID_LEN];
    MPI_CHECK(
        MPI_Allgather(info.visible_devices, GPU_VISIBLE_LEN, MPI_CHAR, views, GPU_VISIBLE_LEN, MPI_CHAR, env.local));
    snprintf(bus0, sizeof bus0, "%s", info.pci_bus_id);
    MPI_CHECK(MPI_Bcast(bus0, GPU_BUS_ID_LEN, MPI_CHAR, 0, env.local));
    gpu_node_verdict want = strcmp(views[0], views[1]) == 0 ? GPU_NODE_OVERSUBSCRIBED : GPU_NODE_SHARED;

    CHECK(info.name[0] && info.pci_bus_id[0], "device properties missing");
    CHECK(info.visible >= 1 && info.device >= 0 && info.device < info.visible, "device %d of %d", info.device,
          info.visible);
    CHECK(info.driver_version > 0 && info.runtime_version > 0 && info.nccl_version > 0, "versions %d %d %d",
          info.driver_version, info.runtime_version, info.nccl_version);
    CHECK(v == want, "verdict %d, expected %d (%s)", (int)v, (int)want, why);
    CHECK(strstr(why, bus0) != NULL, "the message does not name GPU %s: %s", bus0, why);
    CHECK(strstr(why, want == GPU_NODE_SHARED ? "--gpus-per-task=1" : "--ntasks-per-node=") != NULL,
          "the message gives no fix: %s", why);
    CHECK(gpu_bound_device() == -1, "a device was bound although the check failed");

    /* Both ranks hold the same message (the job's verdict is broadcast). */
    char other[GPU_MSG_LEN];
    memcpy(other, why, sizeof other);
    MPI_CHECK(MPI_Bcast(other, GPU_MSG_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
    CHECK(strcmp(other, why) == 0, "ranks disagree: '%s' versus '%s'", other, why);

    char line[GPU_MSG_LEN + 64];
    snprintf(line, sizeof line, "duplicate GPU detected: %s", why);
    leave(0, "PASS", line);
}
