/* probe_port HOST:PORT: the check rank 0 makes of --bootstrap-addr before NCCL's bootstrap root listens
 * there (src/gpu/gpu_mpi.c), runnable in a CPU-only build: prints "ok" or the message, exits 0 or 1.
 * tests/multinode/mpirun-nodes.sh runs it on emulated nodes, where a host name means another machine. */
#include <stdio.h>

#include "gpu/gpu_plan.h"

int main(int argc, char **argv)
{
    char host[256], msg[GPU_MSG_LEN];
    const char *err = NULL;
    int port = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: probe_port HOST:PORT\n");
        return 2;
    }
    if (gpu_plan_parse_hostport(argv[1], host, sizeof host, &port, &err) != 0) {
        printf("%s: %s\n", argv[1], err);
        return 1;
    }
    if (gpu_plan_probe_port(host, port, msg, sizeof msg) != 0) {
        printf("%s: %s\n", argv[1], msg);
        return 1;
    }
    printf("ok: %s\n", argv[1]);
    return 0;
}
