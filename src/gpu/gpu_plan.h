/* Pure decisions of the GPU path: no CUDA, no NCCL, no MPI. Compiled in every configuration (the
 * CPU-only build unit-tests it, tests/unit/check_gpu_plan.c) and used by src/gpu/cuda/ and src/gpu/gpu_mpi.c:
 * - which GPU a rank takes, and whether the ranks of one node would share one (gathered PCI bus IDs);
 * - why no GPU is usable (for --device auto's fallback line and --device cuda's error);
 * - where NCCL's bootstrap listens (--bootstrap-addr versus NCCL_COMM_ID), and whether that port is free;
 * - the bus bandwidth formula of nccl-tests. */
#ifndef MNIST_GPU_PLAN_H
#define MNIST_GPU_PLAN_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GPU_BUS_ID_LEN = 32,  /* "0000:3B:00.0" from cudaDeviceGetPCIBusId, with room for 8-digit domains */
    GPU_VISIBLE_LEN = 96, /* CUDA_VISIBLE_DEVICES as shown in messages (longer values are cut with "...") */
    GPU_MSG_LEN = 1024    /* messages of this module, all one line */
};

/* ---- Device choice ---------------------------------------------------------------------------- */

/* The device a rank takes among those it sees: local_rank % visible. One rule for both launch styles:
 * every rank sees all GPUs of its node (local rank i takes GPU i), or Slurm binds one GPU per task
 * (--gpus-per-task=1: every rank sees one device, index 0). visible must be > 0. */
int gpu_plan_device_index(int local_rank, int visible);

/* What CUDA_VISIBLE_DEVICES does to the GPU count: NULL when it is unset or names devices; otherwise
 * why it hides every GPU ("CUDA_VISIBLE_DEVICES is set but empty ...", "-1", Slurm's "NoDevFiles"). */
const char *gpu_plan_visible_devices_hidden(const char *cvd);

/* CUDA_VISIBLE_DEVICES for messages and the start-up table: "(unset)", or the value (cut with "..."). */
void gpu_plan_visible_devices_show(const char *cvd, char *buf, size_t len);

/* The outcome of cudaGetDeviceCount, without CUDA types. */
typedef enum {
    GPU_PROBE_OK,                  /* cudaSuccess */
    GPU_PROBE_INSUFFICIENT_DRIVER, /* cudaErrorInsufficientDriver: no driver, or one older than the runtime */
    GPU_PROBE_NO_DEVICE,           /* cudaErrorNoDevice */
    GPU_PROBE_OTHER                /* anything else: detail says what */
} gpu_probe_status;

/* 1 when a usable GPU exists (status OK and count > 0). Otherwise 0 and one line in why: no driver
 * (driver_version 0), a driver too old for the runtime, CUDA_VISIBLE_DEVICES hiding every GPU, no device,
 * or the CUDA error (detail). Versions are CUDA's integers (13000 = 13.0). */
int gpu_plan_usable(gpu_probe_status status, int count, int driver_version, int runtime_version, const char *cvd,
                    const char *detail, char *why, size_t len);

/* One rank's choice, gathered over the ranks of a node (plain bytes: MPI_BYTE). */
typedef struct {
    int rank; /* in MPI_COMM_WORLD */
    int local_rank;
    int visible;                           /* devices this rank sees */
    int device;                            /* the index it takes among them */
    char bus_id[GPU_BUS_ID_LEN];           /* PCI bus ID of that device */
    char visible_devices[GPU_VISIBLE_LEN]; /* gpu_plan_visible_devices_show() of its CUDA_VISIBLE_DEVICES */
} gpu_slot;

typedef enum {
    GPU_NODE_OK = 0,         /* every rank of the node has a GPU of its own */
    GPU_NODE_OVERSUBSCRIBED, /* more ranks than GPUs: all ranks see the same V < ranks devices */
    GPU_NODE_SHARED          /* two ranks chose the same GPU from different visible sets */
} gpu_node_verdict;

/* Checks the slots of the n ranks on host (any order). On a problem writes one line into msg naming the
 * ranks, the bus ID, CUDA_VISIBLE_DEVICES and the #SBATCH/srun options that fix it. Bus IDs compare
 * without regard to case. */
gpu_node_verdict gpu_plan_check_node(const gpu_slot *slots, int n, const char *host, char *msg, size_t len);

/* ---- NCCL bootstrap address ------------------------------------------------------------------- */

/* HOST:PORT, [IPV6]:PORT or IPV6-free host names; port 1..65535. 0 on success; -1 with *err set. */
int gpu_plan_parse_hostport(const char *s, char *host, size_t hostlen, int *port, const char **err);

typedef enum {
    GPU_COMM_ID_AUTO,   /* NCCL chooses an interface and a free port; the unique ID carries them */
    GPU_COMM_ID_OPTION, /* --bootstrap-addr: we set NCCL_COMM_ID to it on every rank */
    GPU_COMM_ID_ENV     /* NCCL_COMM_ID from the user's environment: it wins over --bootstrap-addr */
} gpu_comm_id_source;

typedef struct {
    gpu_comm_id_source source;
    const char *addr; /* HOST:PORT rank 0's bootstrap root listens on; NULL for AUTO */
    int overridden;   /* --bootstrap-addr was given but NCCL_COMM_ID wins */
} gpu_comm_id_plan;

/* option: --bootstrap-addr or NULL; env: getenv("NCCL_COMM_ID") (empty counts as unset). */
gpu_comm_id_plan gpu_plan_comm_id(const char *option, const char *env);
/* The log line saying which address NCCL's bootstrap uses and why. */
void gpu_plan_comm_id_describe(const gpu_comm_id_plan *p, const char *option, char *buf, size_t len);

/* Rank 0's check before NCCL's bootstrap root listens on host:port: bind a TCP socket there (with
 * SO_REUSEADDR like NCCL, but without SO_REUSEPORT, so a live listener, even another job's NCCL root,
 * is found), then close it. 0 when the port is free; otherwise the errno (EADDRINUSE: port in use,
 * EADDRNOTAVAIL: host is not an address of this machine) or -1 (host does not resolve), with one line
 * in msg. NCCL resolves host names the same way (getaddrinfo, first answer). Racy by nature: a process
 * may take the port between this check and NCCL's bind. */
int gpu_plan_probe_port(const char *host, int port, char *msg, size_t len);

/* ---- Figures ---------------------------------------------------------------------------------- */

/* nccl-tests: algbw = bytes / seconds, busbw = algbw * 2 (n - 1) / n for all-reduce (bytes per second).
 * For the GPU all-reduce test's report (tests/gpu/mpi_gpu_allreduce.c); the trainer reports its own figure. */
double gpu_plan_algbw(double bytes, double seconds);
double gpu_plan_busbw_allreduce(double bytes, double seconds, int nranks);
/* "2.28.9" from ncclGetVersion's code (>= 2.9: major*10000 + minor*100 + patch; older: *1000 + *100). */
void gpu_plan_nccl_version_string(int code, char *buf, size_t len);
/* "13.0" from a CUDA driver/runtime version (13000); "none" for 0. */
void gpu_plan_cuda_version_string(int code, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
