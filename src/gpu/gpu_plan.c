#define _POSIX_C_SOURCE 200809L /* getaddrinfo, strcasecmp under a strict -std=c11 too */
#include "gpu/gpu_plan.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- Device choice ---------------------------------------------------------------------------- */

int gpu_plan_device_index(int local_rank, int visible)
{
    return visible > 0 && local_rank >= 0 ? local_rank % visible : 0;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

const char *gpu_plan_visible_devices_hidden(const char *cvd)
{
    if (!cvd)
        return NULL;
    const char *s = skip_space(cvd);
    if (!*s)
        return "CUDA_VISIBLE_DEVICES is set but empty: this task was given no GPU (request GPUs with "
               "--gpus-per-task=1 or --gpus-per-node=N, or unset CUDA_VISIBLE_DEVICES)";
    if (strncmp(s, "NoDevFiles", 10) == 0)
        return "CUDA_VISIBLE_DEVICES=NoDevFiles: Slurm gave this task no GPU (request GPUs with "
               "--gpus-per-task=1 or --gpus-per-node=N)";
    /* CUDA reads the list up to the first invalid entry: a leading -1 hides every device. */
    if (s[0] == '-')
        return "CUDA_VISIBLE_DEVICES starts with a negative index, which hides every GPU";
    return NULL;
}

void gpu_plan_visible_devices_show(const char *cvd, char *buf, size_t len)
{
    if (!len)
        return;
    if (!cvd) {
        snprintf(buf, len, "(unset)");
        return;
    }
    size_t n = strlen(cvd);
    if (n < len) {
        snprintf(buf, len, "%s", cvd);
    } else if (len > 4) {
        snprintf(buf, len, "%.*s...", (int)(len - 4), cvd);
    } else {
        buf[0] = '\0';
    }
}

int gpu_plan_usable(gpu_probe_status status, int count, int driver_version, int runtime_version, const char *cvd,
                    const char *detail, char *why, size_t len)
{
    if (status == GPU_PROBE_OK && count > 0)
        return 1;
    char drv[16], rt[16], show[GPU_VISIBLE_LEN];
    gpu_plan_cuda_version_string(driver_version, drv, sizeof drv);
    gpu_plan_cuda_version_string(runtime_version, rt, sizeof rt);
    gpu_plan_visible_devices_show(cvd, show, sizeof show);
    const char *hidden = gpu_plan_visible_devices_hidden(cvd);
    if (status == GPU_PROBE_INSUFFICIENT_DRIVER && driver_version == 0)
        snprintf(why, len, "no NVIDIA driver on this node (libcuda.so.1 is missing or cannot be loaded)");
    else if (status == GPU_PROBE_INSUFFICIENT_DRIVER)
        snprintf(why, len,
                 "the NVIDIA driver supports CUDA %s but this build uses the CUDA %s runtime: update the "
                 "driver, or build with the CUDA toolkit the driver supports",
                 drv, rt);
    else if (hidden)
        snprintf(why, len, "%s", hidden);
    else if (status == GPU_PROBE_NO_DEVICE || status == GPU_PROBE_OK)
        snprintf(why, len, "no CUDA device found (driver for CUDA %s present, CUDA_VISIBLE_DEVICES=%s)", drv, show);
    else
        snprintf(why, len, "cudaGetDeviceCount failed: %s", detail && *detail ? detail : "unknown CUDA error");
    return 0;
}

gpu_node_verdict gpu_plan_check_node(const gpu_slot *slots, int n, const char *host, char *msg, size_t len)
{
    int a = -1, b = -1;
    /* The duplicate pair with the lowest world ranks, so every rank reports the same one. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j || slots[i].rank >= slots[j].rank || strcasecmp(slots[i].bus_id, slots[j].bus_id) != 0)
                continue;
            if (a < 0 || slots[i].rank < slots[a].rank ||
                (slots[i].rank == slots[a].rank && slots[j].rank < slots[b].rank))
                a = i, b = j;
        }
    if (a < 0) {
        if (len)
            msg[0] = '\0';
        return GPU_NODE_OK;
    }
    int same_view = 1;
    for (int i = 1; i < n; i++)
        if (slots[i].visible != slots[0].visible || strcmp(slots[i].visible_devices, slots[0].visible_devices) != 0)
            same_view = 0;
    if (same_view && n > slots[0].visible) {
        int v = slots[0].visible;
        snprintf(msg, len,
                 "%d ranks on %s but only %d GPU%s visible to them (CUDA_VISIBLE_DEVICES=%s): ranks %d and "
                 "%d would share GPU %s. Run one rank per GPU: '#SBATCH --ntasks-per-node=%d' with "
                 "'--gpus-per-node=%d' (or '--gpus-per-task=1'), or 'mpirun -np %d' on this node",
                 n, host, v, v == 1 ? "" : "s", slots[0].visible_devices, slots[a].rank, slots[b].rank, slots[a].bus_id,
                 v, v, v);
        return GPU_NODE_OVERSUBSCRIBED;
    }
    snprintf(msg, len,
             "ranks %d and %d on %s would share GPU %s (rank %d: device %d of %d visible, "
             "CUDA_VISIBLE_DEVICES=%s; rank %d: device %d of %d visible, CUDA_VISIBLE_DEVICES=%s). Give every task "
             "its own GPU: 'srun --gpus-per-task=1', or '--gpus-per-node=N --ntasks-per-node=N' with every task "
             "seeing all N GPUs; do not set CUDA_VISIBLE_DEVICES per rank by hand",
             slots[a].rank, slots[b].rank, host, slots[a].bus_id, slots[a].rank, slots[a].device, slots[a].visible,
             slots[a].visible_devices, slots[b].rank, slots[b].device, slots[b].visible, slots[b].visible_devices);
    return GPU_NODE_SHARED;
}

/* ---- NCCL bootstrap address ------------------------------------------------------------------- */

int gpu_plan_parse_hostport(const char *s, char *host, size_t hostlen, int *port, const char **err)
{
    const char *h, *he, *p;
    if (!s || !*s) {
        *err = "empty address (expected HOST:PORT)";
        return -1;
    }
    if (s[0] == '[') {
        h = s + 1;
        he = strchr(h, ']');
        if (!he || he[1] != ':') {
            *err = "expected [IPV6]:PORT";
            return -1;
        }
        p = he + 2;
    } else {
        he = strrchr(s, ':');
        if (!he) {
            *err = "missing ':PORT' (expected HOST:PORT)";
            return -1;
        }
        if (memchr(s, ':', (size_t)(he - s))) {
            *err = "an IPv6 address needs brackets: [ADDRESS]:PORT";
            return -1;
        }
        h = s;
        p = he + 1;
    }
    if (he == h) {
        *err = "empty host (expected HOST:PORT)";
        return -1;
    }
    if ((size_t)(he - h) >= hostlen) {
        *err = "host name too long";
        return -1;
    }
    long v = 0;
    if (!*p) {
        *err = "empty port (expected HOST:PORT)";
        return -1;
    }
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9' || v > 65535) {
            *err = "the port is not an integer in 1..65535";
            return -1;
        }
        v = v * 10 + (*q - '0');
    }
    if (v < 1 || v > 65535) {
        *err = "the port is not an integer in 1..65535";
        return -1;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    *port = (int)v;
    return 0;
}

gpu_comm_id_plan gpu_plan_comm_id(const char *option, const char *env)
{
    if (option && !*option)
        option = NULL;
    if (env && *env)
        return (gpu_comm_id_plan){.source = GPU_COMM_ID_ENV, .addr = env, .overridden = option != NULL};
    if (option)
        return (gpu_comm_id_plan){.source = GPU_COMM_ID_OPTION, .addr = option};
    return (gpu_comm_id_plan){.source = GPU_COMM_ID_AUTO};
}

void gpu_plan_comm_id_describe(const gpu_comm_id_plan *p, const char *option, char *buf, size_t len)
{
    switch (p->source) {
    case GPU_COMM_ID_OPTION:
        snprintf(buf, len,
                 "NCCL bootstrap: rank 0 listens on %s (--bootstrap-addr; NCCL_COMM_ID set to it on every "
                 "rank)",
                 p->addr);
        break;
    case GPU_COMM_ID_ENV:
        if (p->overridden)
            snprintf(buf, len,
                     "NCCL bootstrap: rank 0 listens on %s from NCCL_COMM_ID in the environment, which takes "
                     "precedence over --bootstrap-addr %s",
                     p->addr, option ? option : "");
        else
            snprintf(buf, len, "NCCL bootstrap: rank 0 listens on %s (NCCL_COMM_ID from the environment)", p->addr);
        break;
    default:
        snprintf(buf, len,
                 "NCCL bootstrap: NCCL chooses rank 0's interface and a free port (no --bootstrap-addr, "
                 "NCCL_COMM_ID unset)");
        break;
    }
}

int gpu_plan_probe_port(const char *host, int port, char *msg, size_t len)
{
    char service[16], numeric[64] = "?", self[256] = "?";
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(msg, len, "cannot resolve '%s': %s", host, rc ? gai_strerror(rc) : "no address");
        if (res)
            freeaddrinfo(res);
        return -1;
    }
    getnameinfo(res->ai_addr, res->ai_addrlen, numeric, sizeof numeric, NULL, 0, NI_NUMERICHOST);
    int err = 0, fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (fd < 0) {
        err = errno;
    } else {
        int one = 1;
        /* NCCL sets SO_REUSEADDR (and SO_REUSEPORT) on a forced port: TIME_WAIT leftovers of an earlier run
         * do not block it, so they must not block us either; a listener does. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(fd, res->ai_addr, res->ai_addrlen) != 0)
            err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (!err) {
        if (len)
            msg[0] = '\0';
        return 0;
    }
    gethostname(self, sizeof self - 1);
    self[sizeof self - 1] = '\0';
    if (err == EADDRINUSE)
        snprintf(msg, len,
                 "port %d on %s (%s) is in use: another job or process listens there; choose another port "
                 "(slurm/select-port picks one per job) or drop --bootstrap-addr and let NCCL choose",
                 port, host, numeric);
    else if (err == EADDRNOTAVAIL)
        snprintf(msg, len,
                 "%s (%s) is not an address of %s, where rank 0 runs: NCCL's bootstrap root listens on "
                 "rank 0, so HOST must name rank 0's node (the first node of the job)",
                 host, numeric, self);
    else if (err == EACCES)
        snprintf(msg, len,
                 "port %d on %s needs privileges (ports below 1024 are reserved): choose a port of 1024 or "
                 "above",
                 port, host);
    else
        snprintf(msg, len, "cannot bind %s:%d (%s) on %s: %s", host, port, numeric, self, strerror(err));
    return err;
}

/* ---- Figures ---------------------------------------------------------------------------------- */

double gpu_plan_algbw(double bytes, double seconds) { return seconds > 0 ? bytes / seconds : 0; }

double gpu_plan_busbw_allreduce(double bytes, double seconds, int nranks)
{
    return nranks > 0 ? gpu_plan_algbw(bytes, seconds) * 2.0 * (nranks - 1) / nranks : 0;
}

void gpu_plan_nccl_version_string(int code, char *buf, size_t len)
{
    if (code >= 20900)
        snprintf(buf, len, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
    else
        snprintf(buf, len, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

void gpu_plan_cuda_version_string(int code, char *buf, size_t len)
{
    if (code <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%d.%d", code / 1000, code % 1000 / 10);
}
