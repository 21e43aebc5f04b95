/* src/gpu/gpu_mpi.c under MPI with the simulated CUDA runtime and NCCL of tests/gpu/gpu_mock.c: one scenario
 * per run (argv[1]), driven by tests/gpu/gpu-mock-host.sh with 2 ranks on this machine, no GPU needed.
 *   ok              every rank has its own GPU; table, communicator (unique ID broadcast), one step
 *   oversubscribed  1 GPU for 2 ranks                   -> exit 78
 *   shared          rank 1 pinned to rank 0's GPU       -> exit 78
 *   auto-no-gpu     rank 1 has no driver, --device auto -> CPU on every rank, one line
 *   cuda-no-gpu     the same with --device cuda         -> exit 69
 *   port-in-use     --bootstrap-addr on a taken port    -> exit 69
 *   option          --bootstrap-addr on a free port     -> NCCL_COMM_ID set on every rank
 *   env-wins        NCCL_COMM_ID and --bootstrap-addr   -> NCCL_COMM_ID kept, logged
 *   bad-host        --bootstrap-addr not rank 0's host  -> exit 78 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/bootstrap.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "gpu_mock.h"
#include "base/log.h"

static ddp_env env;

/* Rank 0 opens a TCP socket on 127.0.0.1 (listening or just probed and closed); every rank learns its port. */
static int local_port(int keep_listening, int *fd_out)
{
    int port = 0, fd = -1;
    if (world_rank() == 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
            getsockname(fd, (struct sockaddr *)&a, &len) != 0)
            die(EX_OSERR, "cannot open a local test socket");
        port = ntohs(a.sin_port);
        if (!keep_listening) {
            close(fd);
            fd = -1;
        }
    }
    MPI_CHECK(MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (fd_out)
        *fd_out = fd;
    return port;
}

/* One armed step through the real gradient all-reduce: the mock's 2-rank sum doubles every value. */
static void one_step(gpu_comm *c)
{
    enum { N = 3000 };
    static float h[N], out[N];
    float *d;
    if (cudaMalloc((void **)&d, N * sizeof *d) != cudaSuccess)
        die(EX_SOFTWARE, "cudaMalloc");
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 5);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, N, 1000 * sizeof(float));
    gpu_grad_comm_arm(g, 1, 0);
    cudaMemcpyAsync(d + 2000, h + 2000, 1000 * sizeof *d, cudaMemcpyHostToDevice, s);
    gpu_grad_comm_ready(g, 2000, 1000);
    cudaMemcpyAsync(d, h, 2000 * sizeof *d, cudaMemcpyHostToDevice, s);
    gpu_grad_comm_ready(g, 0, 2000);
    gpu_grad_comm_finish(g);
    cudaMemcpyAsync(out, d, N * sizeof *d, cudaMemcpyDeviceToHost, s);
    if (cudaStreamSynchronize(s) != cudaSuccess)
        die(EX_SOFTWARE, "simulated stream deadlocked");
    for (int i = 0; i < N; i++)
        if (out[i] != 2 * h[i])
            die(EX_SOFTWARE, "gradient %d is %g, expected %g", i, (double)out[i], 2.0 * h[i]);
    comm_stats st = gpu_grad_comm_get_stats(g);
    say("one step: %d buckets, blocking %.3f ms (simulated)", st.buckets, 1e3 * st.blocking_s);
    gpu_grad_comm_free(g);
    cudaFree(d);
}

static gpu_comm *select_and_connect(const char *addr)
{
    gpu_info info;
    char desc[64];
    if (!gpu_decide(&env, 1))
        die(EX_SOFTWARE, "gpu_decide chose the CPU");
    gpu_select(&env, &info);
    gpu_describe(&info, desc, sizeof desc);
    say("device %s", desc);
    gpu_report(&env, &info);
    gpu_comm *c = gpu_comm_create(&env, addr, 10.0);
    /* Every rank initialised with rank 0's unique ID (the mock's differ per process). */
    unsigned char id0[NCCL_UNIQUE_ID_BYTES];
    memcpy(id0, mock.last_id, sizeof id0);
    MPI_CHECK(MPI_Bcast(id0, NCCL_UNIQUE_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (memcmp(id0, mock.last_id, sizeof id0) != 0)
        die(EX_SOFTWARE, "this rank initialised NCCL with another unique ID than rank 0");
    if (mock.violations)
        die(EX_SOFTWARE, "NCCL/CUDA API misuse: %s", mock.violation);
    return c;
}

static void finish(gpu_comm *c)
{
    gpu_comm_free(c);
    gpu_release();
    if (mock.violations)
        die(EX_SOFTWARE, "NCCL/CUDA API misuse: %s", mock.violation);
    say("scenario passed");
    bootstrap_finalize(&env);
    exit(0);
}

int main(int argc, char **argv)
{
    error_set_program("gpu_mock_host");
    bootstrap_init(&argc, &argv, &env);
    log_init(0, NULL);
    if (argc != 2)
        die_all(EX_USAGE, "usage: gpu_mock_host SCENARIO");
    const char *sc = argv[1];
    char addr[64];
    mock_reset(EAGER_COMM);
    mock.use_visible_devices = 1;
    unsetenv("NCCL_COMM_ID");
    unsetenv("CUDA_VISIBLE_DEVICES");

    if (strcmp(sc, "ok") == 0) {
        gpu_comm *c = select_and_connect(NULL);
        if (getenv("NCCL_COMM_ID"))
            die(EX_SOFTWARE, "NCCL_COMM_ID set without --bootstrap-addr");
        one_step(c);
        finish(c);
    } else if (strcmp(sc, "oversubscribed") == 0) {
        mock.count = 1;
        select_and_connect(NULL);
    } else if (strcmp(sc, "shared") == 0) {
        if (env.local_rank == 1)
            setenv("CUDA_VISIBLE_DEVICES", "0", 1);
        select_and_connect(NULL);
    } else if (strcmp(sc, "auto-no-gpu") == 0 || strcmp(sc, "cuda-no-gpu") == 0) {
        if (world_rank() == 1) {
            mock.count_err = cudaErrorInsufficientDriver;
            mock.driver = 0;
        }
        int gpu = gpu_decide(&env, sc[0] == 'c');
        int any = 0;
        MPI_CHECK(MPI_Allreduce(&gpu, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        if (any)
            die(EX_SOFTWARE, "a rank chose the GPU although rank 1 has none");
        say("scenario passed");
        bootstrap_finalize(&env);
        return 0;
    } else if (strcmp(sc, "port-in-use") == 0) {
        int fd;
        snprintf(addr, sizeof addr, "127.0.0.1:%d", local_port(1, &fd));
        select_and_connect(addr);
    } else if (strcmp(sc, "option") == 0) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", local_port(0, NULL));
        gpu_comm *c = select_and_connect(addr);
        const char *v = getenv("NCCL_COMM_ID");
        if (!v || strcmp(v, addr) != 0)
            die(EX_SOFTWARE, "NCCL_COMM_ID is '%s', expected '%s'", v ? v : "(unset)", addr);
        finish(c);
    } else if (strcmp(sc, "env-wins") == 0) {
        char mine[64];
        snprintf(mine, sizeof mine, "127.0.0.1:%d", local_port(0, NULL));
        setenv("NCCL_COMM_ID", mine, 1);
        gpu_comm *c = select_and_connect("127.0.0.1:1");
        const char *v = getenv("NCCL_COMM_ID");
        if (!v || strcmp(v, mine) != 0)
            die(EX_SOFTWARE, "NCCL_COMM_ID is '%s', expected the user's '%s'", v ? v : "(unset)", mine);
        finish(c);
    } else if (strcmp(sc, "bad-host") == 0) {
        select_and_connect("192.0.2.1:29500");
    } else {
        die_all(EX_USAGE, "unknown scenario '%s'", sc);
    }
    die(EX_SOFTWARE, "scenario '%s' should have stopped the job", sc);
}
