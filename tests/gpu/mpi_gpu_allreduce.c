/* NCCL path on a GPU machine (2 ranks, one GPU each, under mpirun):
 * - the bucketed gradient all-reduce against exact expected sums, with several bucket sizes, a layer
 *   reported out of order, gradient accumulation (unarmed passes must not communicate), and delays put
 *   on the compute stream before each layer's gradients land (an all-reduce not ordered after them
 *   would reduce the NaN poison underneath);
 * - broadcast and average of device buffers;
 * - timing and bus bandwidth (nccl-tests: busbw = algbw * 2 (n - 1) / n) of all-reduces by size.
 * Exit 77 with a one-line reason without a usable GPU, or with fewer GPUs than ranks on a node. */
#include "config.h"

#include <cuda_runtime_api.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/bootstrap.h"
#include "base/errors.h"
#include "gpu/gpu.h"
#include "base/log.h"

#define CK(call)                                                                  \
    do {                                                                          \
        cudaError_t ck_rc_ = (call);                                              \
        if (ck_rc_ != cudaSuccess)                                                \
            die(EX_SOFTWARE, "%s failed: %s", #call, cudaGetErrorString(ck_rc_)); \
    } while (0)

static ddp_env env;

/* Every rank skips when one has to; the first such rank says why, in one line. */
static void skip_if(int bad, const char *why)
{
    int key = bad ? world_rank() : INT_MAX, first = INT_MAX;
    MPI_CHECK(MPI_Allreduce(&key, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == INT_MAX)
        return;
    if (world_rank() == first)
        printf("SKIP: rank %d on %s: %s\n", world_rank(), env.host, why);
    fflush(stdout);
    bootstrap_finalize(&env);
    exit(77);
}

/* The parameter tensors of the 'net' model, in memory order; backward reports them back to front. */
static const size_t tensors[] = {288, 32, 18432, 64, 1179648, 128, 1280, 10};
enum { NT = sizeof tensors / sizeof *tensors };

static float value(int rank, size_t i, int step)
{
    return (float)(rank + 1) * (float)((i + (size_t)step) % 7 + 1) * 0.25f;
}

static float expected_sum(int world, size_t i, int step)
{
    return (float)((i + (size_t)step) % 7 + 1) * 0.25f * (float)(world * (world + 1) / 2);
}

static void CUDART_CB host_sleep(void *arg)
{
    long us = *(const long *)arg;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void test_grad_comm(gpu_comm *c, size_t bucket_bytes, float *dgrads, float *host, size_t n)
{
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    size_t off[NT];
    off[0] = 0;
    for (int t = 1; t < NT; t++)
        off[t] = off[t - 1] + tensors[t - 1];
    static long delay_us = 2000;
    gpu_grad_comm *g = gpu_grad_comm_create(c, dgrads, n, bucket_bytes);
    enum { STEPS = 4 };
    for (int step = 0; step < STEPS; step++) {
        int accum = step == 2 ? 2 : 1;
        for (int micro = 0; micro < accum; micro++) {
            int armed = micro == accum - 1;
            gpu_grad_comm_arm(g, armed, step);
            long launched = gpu_grad_comm_get_stats(g).launched;
            CK(cudaStreamSynchronize(s)); /* host is about to refill the pinned source */
            for (size_t i = 0; i < n; i++)
                host[i] = value(world_rank(), i, step + 100 * !armed);
            CK(cudaMemsetAsync(dgrads, 0xff, n * sizeof(float), s)); /* NaN poison */
            /* Back to front; at step 1 one layer reports late (non-adjacent range). */
            int order[NT];
            for (int k = 0; k < NT; k++)
                order[k] = NT - 1 - k;
            if (step == 1) {
                int tmp = order[2];
                order[2] = order[3];
                order[3] = tmp;
            }
            for (int k = 0; k < NT; k++) {
                int t = order[k];
                if (k % 3 == 0)
                    CK(cudaLaunchHostFunc(s, host_sleep, &delay_us));
                CK(cudaMemcpyAsync(dgrads + off[t], host + off[t], tensors[t] * sizeof(float), cudaMemcpyHostToDevice,
                                   s));
                gpu_grad_comm_ready(g, off[t], tensors[t]);
            }
            if (!armed && gpu_grad_comm_get_stats(g).launched != launched)
                die(EX_SOFTWARE, "an unarmed pass (gradient accumulation) started an all-reduce");
        }
        gpu_grad_comm_finish(g);
        /* The compute stream waits on the all-reduce: this copy reads the reduced gradients. */
        CK(cudaMemcpyAsync(host, dgrads, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (size_t i = 0; i < n; i++) {
            float want = expected_sum(env.world, i, step);
            if (host[i] != want)
                die(EX_SOFTWARE, "bucket %zu bytes, step %d: gradient %zu is %g, expected %g (the sum over %d ranks)",
                    bucket_bytes, step, i, (double)host[i], (double)want, env.world);
        }
    }
    comm_stats st = gpu_grad_comm_get_stats(g);
    if (st.reductions != STEPS)
        die(EX_SOFTWARE, "%ld reductions counted, expected %d", st.reductions, STEPS);
    if (bucket_bytes == 0 && st.buckets != NT)
        die(EX_SOFTWARE, "bucket 0: %d buckets, expected one per tensor (%d)", st.buckets, NT);
    if (bucket_bytes >= n * sizeof(float) && st.buckets != 1)
        die(EX_SOFTWARE, "bucket larger than the gradient: %d buckets, expected 1", st.buckets);
    double exposed = comm_exposed_per_step(&st);
    say("bucketed all-reduce, bucket %9zu bytes: exact on %d ranks; %2d bucket%s, blocking %.3f ms, exposed %.3f ms "
        "per step, %.0f%% hidden",
        bucket_bytes, env.world, st.buckets, st.buckets == 1 ? "" : "s", 1e3 * st.blocking_s, 1e3 * exposed,
        100 * comm_hidden_fraction(exposed, st.blocking_s));
    gpu_grad_comm_free(g);
}

static void test_broadcast_average(gpu_comm *c, float *dbuf, float *host)
{
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    enum { M = 4099 };
    for (size_t i = 0; i < M; i++)
        host[i] = world_rank() == 0 ? (float)i : -1.0f;
    CK(cudaMemcpyAsync(dbuf, host, M * sizeof(float), cudaMemcpyHostToDevice, s));
    gpu_comm_broadcast(c, dbuf, M, 0, "test buffer");
    CK(cudaMemcpyAsync(host, dbuf, M * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < M; i++)
        if (host[i] != (float)i)
            die(EX_SOFTWARE, "broadcast: element %zu is %g, expected %g", i, (double)host[i], (double)i);
    for (size_t i = 0; i < M; i++)
        host[i] = (float)(world_rank() + 1);
    CK(cudaMemcpyAsync(dbuf, host, M * sizeof(float), cudaMemcpyHostToDevice, s));
    gpu_comm_average(c, dbuf, M, "test buffer");
    CK(cudaMemcpyAsync(host, dbuf, M * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    double want = (env.world + 1) / 2.0;
    for (size_t i = 0; i < M; i++)
        if (fabs(host[i] - want) > 1e-6 * want)
            die(EX_SOFTWARE, "average: element %zu is %g, expected %g", i, (double)host[i], want);
    say("broadcast and average of a device buffer: exact");
}

static void bandwidth(gpu_comm *c, float *dbuf, size_t max_floats, size_t grad_floats)
{
    say("%12s %12s %10s %12s %12s   (all-reduce, sum, float, in place; %d ranks)", "size(B)", "count", "time(us)",
        "algbw(GB/s)", "busbw(GB/s)", env.world);
    for (size_t count = 2048; count <= max_floats; count *= 4) {
        double t = gpu_comm_time_allreduce(c, dbuf, count, 20);
        double bytes = (double)count * sizeof(float);
        say("%12.0f %12zu %10.1f %12.2f %12.2f", bytes, count, 1e6 * t, 1e-9 * gpu_plan_algbw(bytes, t),
            1e-9 * gpu_plan_busbw_allreduce(bytes, t, env.world));
    }
    double t = gpu_comm_time_allreduce(c, dbuf, grad_floats, 20);
    double bytes = (double)grad_floats * sizeof(float);
    say("%12.0f %12zu %10.1f %12.2f %12.2f   (the 'net' gradient)", bytes, grad_floats, 1e6 * t,
        1e-9 * gpu_plan_algbw(bytes, t), 1e-9 * gpu_plan_busbw_allreduce(bytes, t, env.world));
}

int main(int argc, char **argv)
{
    error_set_program("mpi_gpu_allreduce");
    bootstrap_init(&argc, &argv, &env);
    log_init(0, NULL);
    skip_if(env.world < 2, "needs 2 or more ranks (make check runs mpirun -np 2)");
    char why[GPU_MSG_LEN];
    int ok = gpu_available(why, sizeof why);
    skip_if(!ok, why);
    gpu_info info;
    gpu_node_verdict v = gpu_select_try(&env, &info, why, sizeof why);
    skip_if(v != GPU_NODE_OK, why); /* e.g. one GPU for two ranks: NCCL needs one GPU per rank */
    gpu_report(&env, &info);

    gpu_comm *c = gpu_comm_create(&env, NULL, 120.0);
    size_t n = 0;
    for (int t = 0; t < NT; t++)
        n += tensors[t];
    const size_t max_floats = (size_t)32 << 20; /* 128 MiB */
    float *dgrads = NULL, *dbuf = NULL, *host = NULL;
    CK(cudaMalloc((void **)&dgrads, n * sizeof(float)));
    CK(cudaMalloc((void **)&dbuf, max_floats * sizeof(float)));
    CK(cudaMallocHost((void **)&host, n * sizeof(float)));
    CK(cudaMemset(dbuf, 0, max_floats * sizeof(float)));

    const size_t buckets[] = {0, 256 << 10, 1 << 20, (size_t)1 << 30};
    for (size_t b = 0; b < sizeof buckets / sizeof *buckets; b++)
        test_grad_comm(c, buckets[b], dgrads, host, n);
    test_broadcast_average(c, dbuf, host);
    bandwidth(c, dbuf, max_floats, n);

    CK(cudaFree(dgrads));
    CK(cudaFree(dbuf));
    CK(cudaFreeHost(host));
    gpu_comm_free(c);
    gpu_release();
    say("PASS");
    bootstrap_finalize(&env);
    return 0;
}
