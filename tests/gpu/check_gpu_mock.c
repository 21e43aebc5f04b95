/* The real src/gpu/cuda/device.o, nccl_comm.o and gemm_cublas.o against a simulated CUDA runtime,
 * cuBLAS and NCCL (tests/gpu/gpu_mock.c and tests/gpu/gpu_mock_stream.c define the functions they call; the test
 * is linked without libcudart and libnccl), so their control flow runs on a machine without a GPU:
 * - streams are queues executed by a scheduler that is adversarial on purpose: either the communication
 *   stream runs as early as its dependencies allow while the compute stream lags (a missing "comm waits
 *   on compute" makes the all-reduce reduce stale data), or the other way round; events and
 *   cudaStreamWaitEvent have CUDA's snapshot semantics; cudaEventElapsedTime fails on incomplete or
 *   timing-disabled events;
 * - a race detector: each operation (copies and memsets standing for the trainer's kernels, GEMMs,
 *   collectives) names the memory it reads and writes, and one that some legal schedule could run
 *   before earlier work of another stream on the same memory is a violation, whichever order this run
 *   took (so an ordering the host wait already provides is not flagged);
 * - the all-reduce of a simulated 2-rank job doubles the data (the peer holds the same values), so each
 *   gradient must come out exactly 2x: stale, unreduced or twice-reduced values are caught; in a max
 *   all-reduce the peer is the slower rank (its value wins);
 * - NCCL communicators are non-blocking: init and collectives may stay ncclInProgress for a while, and
 *   any NCCL call on a communicator in that state counts as a violation of the API contract.
 * The error paths (injected CUDA, NCCL and cuBLAS failures, hangs, device faults) are in
 * tests/check_gpu_errors.c. What it cannot show: real NCCL/CUDA behaviour, performance, or multi-process
 * agreement. */
#include "config.h"

#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu_mock.h"
#include "mock_comm.h"

/* ---- Tests ------------------------------------------------------------------------------------ */

static const size_t layers[] = {288, 32, 18432, 64, 4099, 128, 1280, 10};
enum { NL = sizeof layers / sizeof *layers };

static void no_violations(void) { ck_assert_msg(mock.violations == 0, "API misuse: %s", mock.violation); }

START_TEST(test_probe_and_init)
{
    mock_reset(_i);
    char why[GPU_MSG_LEN];
    ck_assert_int_eq(gpu_available(why, sizeof why), 1);
    gpu_info info;
    ck_assert_int_eq(gpu_probe(3, &info, why, sizeof why), 0);
    ck_assert_int_eq(info.device, 1); /* local rank 3 of 2 visible */
    ck_assert_str_eq(info.pci_bus_id, "0000:11:00.0");
    ck_assert_str_eq(info.name, "Mock GPU 1");
    ck_assert_int_eq(info.nccl_version, 22809);
    ck_assert_int_eq(gpu_bound_device(), -1); /* probing binds nothing */
    gpu_bind(&info);
    ck_assert_int_eq(gpu_bound_device(), 1);
    ck_assert_ptr_nonnull(gpu_compute_stream());
    mock.current_device = -1;
    unsigned char id[GPU_NCCL_ID_BYTES];
    gpu_nccl_unique_id(id);
    mock.init_polls = 5;
    gpu_comm *c = gpu_comm_init(id, 2, 0, 5.0);
    ck_assert_int_eq(mock.init_blocking_seen, 0);   /* non-blocking init */
    ck_assert_int_eq(mock.init_device_seen, 1);     /* cudaSetDevice before init */
    ck_assert_int_eq(mock.comm_flags_ok, 1);        /* comm stream non-blocking ... */
    ck_assert_int_eq(mock.comm_priority_seen, -5);  /* ... with the highest priority */
    ck_assert_int_eq(mock.compute_flags_ok, 1);     /* compute stream non-blocking too */
    ck_assert_str_eq(mock.module_loading, "EAGER"); /* kernels loaded before any collective */
    gpu_comm_free(c);
    gpu_release();
    no_violations();
}
END_TEST

START_TEST(test_no_gpu)
{
    mock_reset(EAGER_COMM);
    char why[GPU_MSG_LEN];
    mock.count_err = cudaErrorInsufficientDriver;
    mock.driver = 0;
    ck_assert_int_eq(gpu_available(why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "no NVIDIA driver"));
    mock.count_err = cudaSuccess;
    mock.driver = 13000;
    mock.count = 0;
    gpu_info info;
    ck_assert_int_eq(gpu_probe(0, &info, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "no CUDA device"));
}
END_TEST

/* Bucketed all-reduce: every gradient exactly doubled, under both adversarial schedules, with the
 * collectives sometimes staying ncclInProgress (_i bit 1) and several bucket sizes. */
START_TEST(test_grad_allreduce)
{
    mock_reset(_i & 1);
    mock.coll_polls = _i & 2 ? 3 : 0;
    gpu_comm *c = mock_comm_start(3, 2, 5.0);
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    size_t n = 0, off[NL];
    for (int l = 0; l < NL; l++) {
        off[l] = n;
        n += layers[l];
    }
    float *d, *h = malloc(n * sizeof *h), *out = malloc(n * sizeof *out);
    ck_assert_int_eq(cudaMalloc((void **)&d, n * sizeof *d), cudaSuccess);
    const size_t buckets[] = {0, 1024 * sizeof(float), 20000 * sizeof(float), (size_t)1 << 30};
    for (size_t b = 0; b < sizeof buckets / sizeof *buckets; b++) {
        gpu_grad_comm *g = gpu_grad_comm_create(c, d, n, buckets[b]);
        comm_stats st = gpu_grad_comm_get_stats(g);
        ck_assert_double_eq(st.blocking_s, mock.peer_max); /* the slower rank's time */
        enum { STEPS = 4 };
        for (int step = 0; step < STEPS; step++) {
            int accum = step == 1 ? 2 : 1;
            for (int micro = 0; micro < accum; micro++) {
                int armed = micro == accum - 1;
                gpu_grad_comm_arm(g, armed, step);
                long launched = gpu_grad_comm_get_stats(g).launched;
                ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
                for (size_t i = 0; i < n; i++)
                    h[i] = (float)((i + (size_t)step + b) % 11 + 1);
                cudaMemsetAsync(d, 0xff, n * sizeof *d, s); /* NaN poison */
                for (int k = 0; k < NL; k++) {
                    int l = NL - 1 - k;
                    if (step == 2 && (k == 2 || k == 3)) /* a layer reported late */
                        l = NL - 1 - (k ^ 1);
                    cudaMemcpyAsync(d + off[l], h + off[l], layers[l] * sizeof *d, cudaMemcpyHostToDevice, s);
                    gpu_grad_comm_ready(g, off[l], layers[l]);
                }
                if (!armed)
                    ck_assert_int_eq(gpu_grad_comm_get_stats(g).launched, launched);
            }
            gpu_grad_comm_finish(g);
            cudaMemcpyAsync(out, d, n * sizeof *d, cudaMemcpyDeviceToHost, s);
            ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
            for (size_t i = 0; i < n; i++)
                if (out[i] != 2 * h[i])
                    ck_abort_msg("bucket %zu B, step %d: gradient %zu is %g, expected %g", buckets[b], step, i,
                                 (double)out[i], 2.0 * h[i]);
        }
        gpu_wait_compute(); /* the trainer's read-back: settles the steps' exposed times */
        st = gpu_grad_comm_get_stats(g);
        ck_assert_int_eq(st.reductions, STEPS);
        ck_assert_msg(st.exposed_s >= 0, "negative exposed time");
        if (mock.policy == EAGER_COMPUTE) /* the all-reduces lag behind backward: some time is exposed */
            ck_assert_msg(st.exposed_s > 0, "no exposed time settled");
        if (buckets[b] == 0) /* the last step reports in order */
            ck_assert_int_eq(st.buckets, NL);
        if (buckets[b] >= n * sizeof(float))
            ck_assert_int_eq(st.buckets, 1);
        ck_assert_int_ge(st.launched, STEPS * st.buckets / 2);
        gpu_grad_comm_free(g);
    }
    /* Broadcast from the other rank and average: the compute stream sees the results. */
    for (size_t i = 0; i < 100; i++)
        h[i] = -1;
    cudaMemcpyAsync(d, h, 100 * sizeof *d, cudaMemcpyHostToDevice, s);
    gpu_comm_broadcast(c, d, 100, 1, "test");
    gpu_comm_average(c, d, 100, "test");
    cudaMemcpyAsync(out, d, 100 * sizeof *d, cudaMemcpyDeviceToHost, s);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    for (size_t i = 0; i < 100; i++)
        ck_assert_float_eq(out[i], 1000.0f + (float)i);
    ck_assert_double_eq(gpu_comm_time_allreduce(c, d, 100, 4), mock.peer_max);
    gpu_comm_free(c);
    gpu_release();
    free(h);
    free(out);
    no_violations();
}
END_TEST

/* finish() makes no host wait: steps queue back to back until the host is a ring of 64 timed steps ahead of
 * the device, then each finish waits for the oldest and reads its exposed time (both events complete: the
 * communication stream waits for the end of backward); one gpu_wait_compute() settles them all. Both
 * schedules. */
START_TEST(test_steps_without_waits)
{
    enum { N = 1000, RING = 64, STEPS = RING + 6 };
    mock_reset(_i);
    gpu_comm *c = mock_comm_start(3, 2, 5.0);
    float *d;
    ck_assert_int_eq(cudaMalloc((void **)&d, N * sizeof *d), cudaSuccess);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, N, 0);
    long waits = mock.waits;
    for (int step = 0; step < STEPS; step++) {
        gpu_grad_comm_arm(g, 1, step);
        gpu_grad_comm_ready(g, 0, N);
        gpu_grad_comm_finish(g);
        ck_assert_int_eq(mock.waits - waits, (step < RING ? 0 : step - RING + 1));
    }
    gpu_wait_compute();
    ck_assert_int_eq(mock.waits - waits, STEPS - RING + 1);
    comm_stats st = gpu_grad_comm_get_stats(g);
    ck_assert_int_eq(st.reductions, STEPS);
    ck_assert_msg(st.exposed_s > 0, "no exposed time settled");
    gpu_grad_comm_free(g);
    gpu_comm_free(c);
    no_violations();
}
END_TEST

/* With one rank nothing communicates. */
START_TEST(test_single_rank)
{
    mock_reset(EAGER_COMM);
    gpu_info info;
    char why[GPU_MSG_LEN];
    ck_assert_int_eq(gpu_probe(0, &info, why, sizeof why), 0);
    gpu_bind(&info);
    unsigned char id[GPU_NCCL_ID_BYTES] = {0};
    gpu_comm *c = gpu_comm_init(id, 1, 0, 5.0);
    float *d;
    cudaMalloc((void **)&d, 64 * sizeof *d);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, 64, 1024);
    gpu_grad_comm_arm(g, 1, 0);
    gpu_grad_comm_ready(g, 0, 64);
    gpu_grad_comm_finish(g);
    gpu_comm_broadcast(c, d, 64, 0, "x");
    gpu_comm_average(c, d, 64, "x");
    ck_assert_int_eq(mock.collectives, 0);
    ck_assert_int_eq(gpu_grad_comm_get_stats(g).reductions, 0);
    gpu_grad_comm_free(g);
    gpu_comm_free(c);
    no_violations();
}
END_TEST

/* Freeing the gradient all-reduce with buckets in flight (an armed pass never finished) waits for them:
 * afterwards the trainer may use the gradients on the compute stream (the race detector checks the
 * order, the values that the reduction is complete). */
START_TEST(test_free_in_flight)
{
    enum { N = 1000 };
    static float h[N], out[N];
    mock_reset(_i);
    gpu_comm *c = mock_comm_start(3, 2, 5.0);
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    float *d;
    ck_assert_int_eq(cudaMalloc((void **)&d, sizeof h), cudaSuccess);
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 7);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, N, N / 2 * sizeof(float));
    gpu_grad_comm_arm(g, 1, 0);
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s);
    gpu_grad_comm_ready(g, N / 2, N / 2);
    gpu_grad_comm_ready(g, 0, N / 2);
    ck_assert_int_eq(gpu_grad_comm_get_stats(g).launched, 2);
    gpu_grad_comm_free(g);
    cudaMemcpyAsync(out, d, sizeof out, cudaMemcpyDeviceToHost, s);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    no_violations();
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(out[i], 2 * h[i]);
    gpu_comm_free(c);
    gpu_release();
}
END_TEST

/* The race detector the ordering checks rely on: memory touched by two streams is flagged unless an
 * event (snapshot at record time) or a host wait orders the accesses. */
START_TEST(test_race_detector)
{
    static float x[4], y[4], z[4];
    mock_reset(_i);
    cudaStream_t a, b;
    cudaEvent_t e;
    ck_assert_int_eq(cudaStreamCreateWithPriority(&a, cudaStreamNonBlocking, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithPriority(&b, cudaStreamNonBlocking, -5), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&e), cudaSuccess);
    cudaMemsetAsync(x, 0, sizeof x, a);
    cudaEventRecord(e, a);
    cudaMemsetAsync(y, 0, sizeof y, a); /* after the record */
    cudaStreamWaitEvent(b, e, 0);
    cudaMemcpyAsync(z, x, sizeof x, cudaMemcpyDeviceToDevice, b);
    ck_assert_int_eq(mock.violations, 0);
    cudaMemcpyAsync(z, y, sizeof y, cudaMemcpyDeviceToDevice, b); /* the event does not cover y */
    ck_assert_int_eq(mock.violations, 1);
    ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
    cudaMemcpyAsync(z, y, sizeof y, cudaMemcpyDeviceToDevice, b); /* the host saw y written */
    ck_assert_int_eq(mock.violations, 1);
    cudaMemsetAsync(x, 1, sizeof x, a); /* b may still be reading x */
    ck_assert_int_eq(mock.violations, 2);
}
END_TEST

/* gpu_gemm: row-major semantics for all transpose pairs, odd shapes and padded leading dimensions, in each
 * precision mode (the simulated cuBLAS computes what cuBLAS would, and rejects impossible lds). */
static float rm_at(const float *x, int ld, int trans, int i, int j)
{
    return trans ? x[(size_t)j * ld + i] : x[(size_t)i * ld + j];
}

/* A fresh simulation, device 0 bound and cuBLAS initialised in precision. */
static void blas_on_device_0(const char *precision)
{
    mock_reset(EAGER_COMM);
    gpu_info info;
    char why[GPU_MSG_LEN];
    ck_assert_int_eq(gpu_probe(0, &info, why, sizeof why), 0);
    gpu_bind(&info);
    gpu_blas_init(precision);
}

START_TEST(test_gemm)
{
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    static const struct {
        int m, n, k, pad;
    } shapes[] = {{7, 5, 3, 2}, {1, 9, 4, 1}, {13, 1, 11, 3}, {17, 19, 1, 0}};
    blas_on_device_0(precisions[_i]);
    ck_assert_int_eq(mock.blas_on_compute_stream, 1);
    ck_assert_int_eq(mock.blas_math, _i == 1 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1, m = shapes[sh].m, n = shapes[sh].n, k = shapes[sh].k, p = shapes[sh].pad;
            int lda = (ta ? m : k) + p, ldb = (tb ? k : n) + p, ldc = n + p;
            size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
            float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c),
                  *want = malloc(nc * sizeof *want);
            for (size_t i = 0; i < na; i++)
                a[i] = (float)((i * 7) % 13) - 6;
            for (size_t i = 0; i < nb; i++)
                b[i] = (float)((i * 5) % 11) - 5;
            for (size_t i = 0; i < nc; i++)
                c[i] = want[i] = (float)(i % 3);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double acc = 0;
                    for (int q = 0; q < k; q++)
                        acc += (double)rm_at(a, lda, ta, i, q) * rm_at(b, ldb, tb, q, j);
                    want[(size_t)i * ldc + j] = (float)(0.5 * acc + 2.0 * want[(size_t)i * ldc + j]);
                }
            gpu_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c, ldc);
            ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) /* padding untouched, products exact in these small integers */
                    ck_assert_msg(c[(size_t)i * ldc + j] == want[(size_t)i * ldc + j],
                                  "%s shape %zu trans %d,%d: C[%d][%d] = %g, expected %g", precisions[_i], sh, ta, tb,
                                  i, j, (double)c[(size_t)i * ldc + j], (double)want[(size_t)i * ldc + j]);
            for (size_t i = 0; i < nc; i++)
                if ((int)(i % (size_t)ldc) >= n)
                    ck_assert_float_eq(c[i], (float)(i % 3));
            free(a), free(b), free(c), free(want);
        }
    ck_assert_int_eq(mock.gemm_ex_calls, _i == 2 ? 16 : 0);
    if (_i == 2)
        ck_assert_int_eq(mock.gemm_ex_compute, CUBLAS_COMPUTE_32F_FAST_16BF);
    gpu_blas_free();
    ck_assert_int_eq(mock.blas_handles, 0);
    no_violations();
}
END_TEST

/* MNIST_DDP_FC=epilogue: linear_forward (and its ReLU) as one cuBLASLt matmul, y[N][out] = x w^T + b, in each
 * precision's compute type; one heuristic query a shape; every descriptor released; composed (0) where cuBLASLt
 * has no algorithm. */
START_TEST(test_linear_lt)
{
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    static const cublasComputeType_t compute[] = {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32,
                                                  CUBLAS_COMPUTE_32F_FAST_16BF};
    static const int shapes[][3] = {{5, 7, 3}, {1, 4, 9}, {13, 11, 1}}; /* N, in, out */
    blas_on_device_0(precisions[_i]);
    gpu_blas_lt_init();
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    for (int sh = 0; sh < 3; sh++)
        for (int relu = 0; relu < 2; relu++) {
            int N = shapes[sh][0], in = shapes[sh][1], out = shapes[sh][2];
            float *x = malloc((size_t)N * in * sizeof *x), *w = malloc((size_t)out * in * sizeof *w),
                  *b = malloc((size_t)out * sizeof *b), *y = calloc((size_t)N * out, sizeof *y);
            for (int i = 0; i < N * in; i++)
                x[i] = (float)((i * 7) % 13) - 6;
            for (int i = 0; i < out * in; i++)
                w[i] = (float)((i * 5) % 11) - 5;
            for (int i = 0; i < out; i++)
                b[i] = (float)(i % 5) - 2;
            for (int rep = 0; rep < 2; rep++) { /* the second call reuses the first one's plan */
                ck_assert_int_eq(gpu_linear_lt(x, w, b, y, N, in, out, relu), 1);
                ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
                for (int n = 0; n < N; n++)
                    for (int o = 0; o < out; o++) {
                        double acc = b[o];
                        for (int q = 0; q < in; q++)
                            acc += (double)x[n * in + q] * w[o * in + q];
                        float want = relu && acc < 0 ? 0.0f : (float)acc;
                        ck_assert_msg(y[n * out + o] == want, "%s %dx%dx%d relu %d: y[%d][%d] = %g, expected %g",
                                      precisions[_i], N, in, out, relu, n, o, (double)y[n * out + o], (double)want);
                    }
            }
            free(x), free(w), free(b), free(y);
        }
    ck_assert_int_eq(mock.lt_heuristics, 6);
    ck_assert_int_eq(mock.lt_matmuls, 12);
    ck_assert_int_eq(mock.lt_compute, compute[_i]);
    /* No algorithm for a shape: nothing queued, the caller composes. */
    mock_fail("cublasLtMatmulAlgoGetHeuristic", 0, CUBLAS_STATUS_NOT_SUPPORTED, 0);
    float one = 1;
    ck_assert_int_eq(gpu_linear_lt(&one, &one, &one, &one, 1, 1, 1, 0), 0);
    ck_assert_int_eq(mock.lt_matmuls, 12);
    gpu_blas_free();
    ck_assert_int_eq(mock.lt_handles, 0);
    ck_assert_int_eq(mock.lt_objects, 0);
    no_violations();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_mock");
    TCase *tc = tcase_create("gpu_mock");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_probe_and_init, 0, 2);
    tcase_add_test(tc, test_no_gpu);
    tcase_add_loop_test(tc, test_grad_allreduce, 0, 4);
    tcase_add_test(tc, test_single_rank);
    tcase_add_loop_test(tc, test_steps_without_waits, 0, 2);
    tcase_add_loop_test(tc, test_free_in_flight, 0, 2);
    tcase_add_loop_test(tc, test_race_detector, 0, 2);
    tcase_add_loop_test(tc, test_gemm, 0, 3);
    tcase_add_loop_test(tc, test_linear_lt, 0, 3);
    suite_add_tcase(s, tc);
    return check_run(s);
}
