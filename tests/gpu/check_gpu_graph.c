/* The simulated CUDA graphs (tests/gpu/gpu_mock_graph.c): stream capture records instead of running,
 * cudaGraphLaunch replays in order with the captured cross-stream edges (the scheduler's adversarial
 * policies and the race detector see the replay), and the capture errors a trainer must fall back from. */
#include "config.h"

#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bf16.h"
#include "gpu/gpu.h"
#include "gpu_mock.h"
#include "mock_comm.h"

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                               cudaStream_t stream);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *name, int limit,
                            uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);

enum { N = 64 };
static float src[N], grad[N], out[N], ids[N];
static const char optimizer = 0; /* a kernel the simulation knows as the optimizer's by its name */
static cudaStream_t a, b;        /* compute (priority 0) and communication (-5), as the trainer's */
static cudaEvent_t e1, e2;
static struct ncclComm comm = {.rank = 0, .nranks = 2};

static void streams(int policy)
{
    mock_reset(policy);
    ck_assert_int_eq(cudaStreamCreateWithPriority(&a, cudaStreamNonBlocking, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithPriority(&b, cudaStreamNonBlocking, -5), cudaSuccess);
    ck_assert_int_eq(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming), cudaSuccess);
    ck_assert_int_eq(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming), cudaSuccess);
    __cudaRegisterFunction(NULL, &optimizer, NULL, "_Z5k_sgdmPfPKfS_fffS_", -1, NULL, NULL, NULL, NULL, NULL);
}

/* One "step" as the trainer queues it: clear the gradient, a kernel, compute it (a copy from src), the
 * all-reduce on the communication stream after it (doubles it: the peer holds the same), the compute
 * stream after the all-reduce, read it (a copy to out), the optimizer's kernel. */
static void step(void)
{
    ck_assert_int_eq(cudaMemsetAsync(grad, 0, sizeof grad, a), cudaSuccess);
    ck_assert_int_eq(__cudaLaunchKernel((cudaKernel_t)src, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, a), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(grad, src, sizeof src, cudaMemcpyDeviceToDevice, a), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(e1, a), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(b, e1, 0), cudaSuccess);
    ck_assert_int_eq(ncclAllReduce(grad, grad, N, ncclFloat, ncclSum, &comm, b), ncclSuccess);
    ck_assert_int_eq(cudaEventRecord(e2, b), cudaSuccess);
    ck_assert_int_eq(cudaStreamWaitEvent(a, e2, 0), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(out, grad, sizeof out, cudaMemcpyDeviceToDevice, a), cudaSuccess);
    ck_assert_int_eq(__cudaLaunchKernel((cudaKernel_t)&optimizer, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, a),
                     cudaSuccess);
}

static cudaGraph_t capture_step(void)
{
    ck_assert_int_eq(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    step();
    enum cudaStreamCaptureStatus st;
    ck_assert_int_eq(cudaStreamIsCapturing(b, &st), cudaSuccess);
    ck_assert_int_eq(st, cudaStreamCaptureStatusActive); /* b joined through e1 */
    cudaGraph_t g;
    ck_assert_int_eq(cudaStreamEndCapture(a, &g), cudaSuccess);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* Capture runs nothing and counts no host launch; each launch replays the step on the data of the moment
 * (device memory, not what it held at capture), in order under both schedules (the all-reduce after the
 * copy, the read after the all-reduce), without a race; one graph launch each. */
START_TEST(test_replay)
{
    streams(_i);
    for (int i = 0; i < N; i++)
        src[i] = out[i] = -1;
    long launches = mock.launches, na = a->n, nb = b->n;
    cudaGraph_t g = capture_step();
    ck_assert_int_eq(a->n, na);
    ck_assert_int_eq(b->n, nb);
    ck_assert_int_eq(mock.launches, launches);
    ck_assert_float_eq(out[0], -1);
    cudaGraphExec_t x;
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess); /* the executable graph is independent of it */
    for (int k = 1; k <= 3; k++) {
        for (int i = 0; i < N; i++)
            src[i] = (float)(100 * k + i);
        ck_assert_int_eq(cudaGraphLaunch(x, a), cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
        for (int i = 0; i < N; i++)
            ck_assert_float_eq(out[i], 2 * src[i]);
        ck_assert_int_eq(mock.graph_launches, k);
    }
    ck_assert_int_eq(mock.launches, launches);
    ck_assert_msg(mock.violations == 0, "API misuse: %s", mock.violation);
    /* The replayed work is visible to the race detector: an unordered write of out on b conflicts. */
    ck_assert_int_eq(cudaGraphLaunch(x, a), cudaSuccess);
    cudaMemsetAsync(out, 0, sizeof out, b);
    ck_assert_int_eq(mock.violations, 1);
    ck_assert_int_eq(cudaGraphExecDestroy(x), cudaSuccess);
}
END_TEST

/* The per-step report still cuts replayed steps at the batch's ids copy after the optimizer's kernel (the
 * trainer's copy, outside the graph) and counts their all-reduce; the captured kernels are not host launches. */
START_TEST(test_trace)
{
    streams(EAGER_COMPUTE);
    cudaGraph_t g = capture_step();
    cudaGraphExec_t x;
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(cudaMemcpyAsync(ids, src, sizeof ids, cudaMemcpyDeviceToDevice, a), cudaSuccess);
        ck_assert_int_eq(cudaGraphLaunch(x, a), cudaSuccess);
    }
    ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
    char path[] = "/tmp/check_gpu_graph.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mock_step_report(path), 0);
    FILE *f = fopen(path, "r");
    char line[256];
    int steps = 0;
    while (fgets(line, sizeof line, f)) {
        long s, l, gm, w, al, bu;
        ck_assert_int_eq(
            sscanf(line, "step %ld launches %ld gemms %ld waits %ld allocs %ld buckets %ld", &s, &l, &gm, &w, &al, &bu),
            6);
        if (s == 0)
            continue; /* before the first step */
        ck_assert_msg(l == 0 && bu == 1, "replayed step %ld: %ld launches, %ld all-reduces", s, l, bu);
        steps++;
    }
    fclose(f);
    unlink(path);
    ck_assert_int_eq(steps, 3); /* the 4th runs into the end */
}
END_TEST

/* A host wait inside the capture is refused and spoils it; so is waiting on an event recorded outside it,
 * and a joined stream that never rejoins. Afterwards nothing captures and eager work runs. */
START_TEST(test_capture_errors)
{
    streams(_i % 2);
    cudaGraph_t g = (cudaGraph_t)&comm;
    cudaEventRecord(e2, a); /* outside any capture */
    ck_assert_int_eq(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cudaMemsetAsync(grad, 0, sizeof grad, a);
    cudaError_t want = cudaErrorStreamCaptureInvalidated;
    if (_i < 2) {
        ck_assert_int_eq(cudaStreamSynchronize(a), cudaErrorStreamCaptureUnsupported);
    } else if (_i < 4) {
        ck_assert_int_eq(cudaStreamWaitEvent(a, e2, 0), cudaErrorStreamCaptureIsolation);
    } else {
        cudaEventRecord(e1, a);
        cudaStreamWaitEvent(b, e1, 0);
        cudaMemsetAsync(out, 0, sizeof out, b); /* b never rejoins a */
        want = cudaErrorStreamCaptureUnjoined;
    }
    ck_assert_int_eq(cudaStreamEndCapture(a, &g), want);
    ck_assert_ptr_null(g);
    enum cudaStreamCaptureStatus st;
    cudaStreamIsCapturing(b, &st);
    ck_assert_int_eq(st, cudaStreamCaptureStatusNone);
    src[0] = 7;
    cudaMemcpyAsync(out, src, sizeof src, cudaMemcpyDeviceToDevice, a);
    ck_assert_int_eq(cudaStreamSynchronize(a), cudaSuccess);
    ck_assert_float_eq(out[0], 7);
}
END_TEST

/* cudaMalloc may synchronise: refused in a thread-local capture, allowed in a relaxed one. An injected
 * instantiation failure returns no executable graph. */
START_TEST(test_alloc_and_instantiate)
{
    streams(EAGER_COMPUTE);
    void *p;
    cudaGraph_t g;
    ck_assert_int_eq(cudaStreamBeginCapture(a, cudaStreamCaptureModeRelaxed), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&p, 16), cudaSuccess);
    ck_assert_int_eq(cudaStreamEndCapture(a, &g), cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
    ck_assert_int_eq(cudaStreamEndCapture(a, &g), cudaErrorStreamCaptureInvalidated);
    g = capture_step();
    mock_fail("cudaGraphInstantiate", 0, cudaErrorInvalidValue, 0);
    cudaGraphExec_t x = (cudaGraphExec_t)&comm;
    ck_assert_int_eq(cudaGraphInstantiate(&x, g, 0), cudaErrorInvalidValue);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(mock.graph_launches, 0);
}
END_TEST

/* Device 0 of the simulation bound, and a communicator of nranks with this process as rank 0. */
/* The gradient all-reduce (gpu/cuda/nccl_grad.cu) in the trainer's graph (gpu/cuda/device.cu): captured once after
 * an eager step, each replay reduces the data of the moment in order with "backward" (no race), counts its
 * buckets, and the host waits (deadline) only when it is a whole ring (64 replays) ahead of the device; the
 * graph keeps its nodes' priorities (the comm stream's for NCCL's kernels); every replayed step is timed (its
 * stamps, read at the host's wait, add to the figures).
 * Cases 0-1: two ranks (both scheduling policies); 2-3: one rank armed alone (gpu_comm_set_alone); 4-5: two
 * ranks exchanging bfloat16 (narrowed, reduced, widened on the comm stream: each value rounded, then the sum);
 * 6-7: one rank armed alone with the communication proxy of an 8-GPU ring at 1 MB/s after each bucket. */
START_TEST(test_grad_comm_replay)
{
    enum { RING = 64, REPLAYS = RING + 6 };
    static float h[N], d[N];
    mock_reset(_i % 2);
    char why[GPU_MSG_LEN];
    int variant = _i / 2, bf16 = variant == 2, alone = variant == 1 || variant == 3;
    gpu_comm *c = mock_comm_start(0, alone ? 1 : 2, 5.0);
    if (alone)
        gpu_comm_set_alone(c);
    comm_proxy_spec proxy = {0.001, 8};
    if (variant == 3)
        gpu_comm_set_proxy(c, &proxy);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, N, N / 2 * sizeof(float));
    if (bf16)
        gpu_grad_comm_set_wire_bf16(g);
    cudaStream_t s = (cudaStream_t)gpu_compute_stream();
    for (int pass = 0; pass < 2; pass++) { /* eager, then captured */
        if (pass)
            ck_assert_int_eq(gpu_graph_begin(why, sizeof why), 0);
        gpu_grad_comm_arm(g, 1, pass);
        cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s); /* backward */
        gpu_grad_comm_ready(g, N / 2, N / 2);
        gpu_grad_comm_ready(g, 0, N / 2);
        gpu_grad_comm_finish(g);
    }
    gpu_graph *graph = gpu_graph_end(why, sizeof why);
    ck_assert_msg(graph != NULL, "%s", why);
    ck_assert_msg(mock.graph_flags_seen & cudaGraphInstantiateFlagUseNodePriority,
                  "the step graph instantiated without node priorities: NCCL's kernels would replay at backward's");
    ck_assert_int_eq(gpu_grad_comm_get_stats(g).launched, 2); /* the captured buckets have not run */
    long waits = mock.waits;
    for (int k = 1; k <= REPLAYS; k++) {
        for (int i = 0; i < N; i++)
            h[i] = (float)(k + i) + 0.3f; /* bf16 rounds it */
        gpu_graph_launch(graph);
        gpu_grad_comm_replayed(g, 1 + k);
        ck_assert_int_eq(gpu_grad_comm_get_stats(g).launched, 2 + 2 * k);
        ck_assert_int_eq(mock.waits - waits, (k <= RING ? 0 : k - RING));
    }
    gpu_wait_compute(); /* the trainer's read-back */
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(d[i], bf16 ? float_from_bf16(bf16_from_float(2 * float_from_bf16(bf16_from_float(h[i]))))
                                      : 2 * h[i]); /* the simulation's peer holds the same, alone too */
    comm_stats st = gpu_grad_comm_get_stats(g);
    ck_assert_int_eq(st.reductions, 1 + REPLAYS); /* the eager step and every replay, timed */
    /* Each replay's exposed time lies within the simulation's time: 10 us per operation run. */
    ck_assert_double_gt(st.exposed_s, 0);
    ck_assert_double_le(st.exposed_s, 1e-5 * (double)mock.time);
    if (variant == 3) { /* 3 timed references of 2 all-reduces, then 2 buckets per step */
        ck_assert_int_eq(mock.proxies, 3 * 2 + 2 * (1 + REPLAYS));
        ck_assert_uint_eq(mock.proxy_read, N / 2);
        ck_assert_uint_eq(mock.proxy_moved, N / 2 * 7 / 4); /* 2 (8 - 1) / 8 of each bucket's bytes */
        /* 128-byte buckets: 224 bytes at 1 MB/s, 224 us */
        ck_assert_uint_ge(mock.proxy_ns, 223999);
        ck_assert_uint_le(mock.proxy_ns, 224000);
    } else
        ck_assert_int_eq(mock.proxies, 0);
    ck_assert_msg(mock.violations == 0, "API misuse: %s", mock.violation);
    gpu_graph_free(graph);
    gpu_grad_comm_free(g);
    gpu_comm_free(c);
}
END_TEST

/* One rank not armed alone: nothing is launched, eager or captured, and the gradients stay this rank's. */
START_TEST(test_one_rank_silent)
{
    static float d[N];
    mock_reset(0);
    gpu_comm *c = mock_comm_start(0, 1, 5.0);
    gpu_grad_comm *g = gpu_grad_comm_create(c, d, N, N / 2 * sizeof(float));
    gpu_grad_comm_arm(g, 1, 0);
    gpu_grad_comm_ready(g, 0, N);
    gpu_grad_comm_finish(g);
    ck_assert_int_eq(gpu_grad_comm_get_stats(g).launched, 0);
    ck_assert_int_eq(mock.collectives, 0);
    gpu_grad_comm_free(g);
    gpu_comm_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_graph");
    TCase *tc = tcase_create("gpu_graph");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_replay, 0, 2);
    tcase_add_test(tc, test_trace);
    tcase_add_loop_test(tc, test_capture_errors, 0, 6);
    tcase_add_test(tc, test_alloc_and_instantiate);
    tcase_add_loop_test(tc, test_grad_comm_replay, 0, 8);
    tcase_add_test(tc, test_one_rank_silent);
    suite_add_tcase(s, tc);
    return check_run(s);
}
