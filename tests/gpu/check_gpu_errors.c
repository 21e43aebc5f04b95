/* The error paths of src/gpu/cuda/device.o, nccl_comm.o, gemm_cublas.o and step_scalars.o against the simulated CUDA
 * runtime, cuBLAS and NCCL of tests/gpu/gpu_mock.c: one short job (bind, communicator, broadcast, one
 * bucketed gradient step, shutdown) per case, with one failure injected at one point: a CUDA, NCCL or
 * cuBLAS call that fails, a device fault (sticky error), a peer that never answers, an API misuse.
 * Each case must end the process (Check's fork mode runs it alone) with its exit status, an error line
 * naming the operation, ncclCommAbort before exit where a communicator is live and the path aborts it,
 * and no misuse of the simulated API on the way out. */
#include "config.h"

#include "../check_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu_mock.h"
#include "nn/backend.h"

enum { N = 1000 }; /* gradients: two buckets of N / 2 */

/* Where a case injects its failure. */
enum { AT_START, AT_BIND, AT_BCAST, AT_CREATE, AT_STEP, AT_FINISH, AT_IN_FLIGHT, AT_SHUTDOWN };

typedef struct {
    const char *name;
    int at;
    void (*inject)(void);
    int policy;
    double timeout_s;
    int code;         /* exit status */
    const char *says; /* in the error line */
    int abort;        /* ncclCommAbort before exit */
} failure;

static struct {
    gpu_info info;
    gpu_comm *c;
    gpu_grad_comm *g;
    float *d;
} job;

/* ---- Injections ------------------------------------------------------------------------------- */

static void busy_gpu(void) { mock_fail("cudaSetDevice", 0, cudaErrorDevicesUnavailable, 0); }
static void busy_gpu_old_runtime(void) { mock_fail("cudaFree", 0, cudaErrorDevicesUnavailable, 0); }
static void ecc_at_bind(void) { mock_fail("cudaSetDevice", 0, cudaErrorECCUncorrectable, 0); }
static void no_properties(void) { mock_fail("cudaGetDeviceProperties", 0, cudaErrorInvalidDevice, 0); }
static void bind_twice(void) { gpu_bind(&job.info); }
static void comm_before_bind(void) { gpu_comm_init((const unsigned char[GPU_NCCL_ID_BYTES]){0}, 2, 0, 1.0); }
static void no_unique_id(void) { mock_fail("ncclGetUniqueId", 0, ncclSystemError, 0); }
static void init_rejected(void) { mock_fail("ncclCommInitRankConfig", 0, ncclInvalidArgument, 0); }
static void init_error(void)
{
    mock.init_polls = 4;
    mock.init_result = ncclSystemError; /* e.g. the bootstrap root cannot be reached */
}
static void init_never(void) { mock.init_polls = -1; /* a peer never shows up */ }
static void init_poll_fails(void) { mock_fail("ncclCommGetAsyncError", 1, ncclInternalError, 0); }
static void hang(void) { mock.hang_collectives = 1; /* a peer died: collectives never complete */ }
static void ecc_in_wait(void) { mock_fail("cudaEventQuery", 0, cudaErrorECCUncorrectable, 1); }
static void out_of_memory(void) { mock_fail("cudaMalloc", 0, cudaErrorMemoryAllocation, 0); }
static void allreduce_rejected(void) { mock_fail("ncclAllReduce", 0, ncclInvalidUsage, 0); }
static void enqueue_stuck(void) { mock.coll_polls = -1; /* connection setup hangs */ }
static void enqueue_error(void)
{
    mock.coll_polls = 2;
    mock.coll_result = ncclRemoteError;
}
static void async_error(void)
{
    hang();
    mock.async_error_after = 50; /* ... and NCCL's proxy notices it */
}
static void async_internal_error(void)
{
    async_error();
    mock.async_error = ncclInternalError;
}
/* The two enqueue polls succeed; the first poll of the wait fails. */
static void wait_poll_fails(void)
{
    hang();
    mock_fail("ncclCommGetAsyncError", 2, ncclUnhandledCudaError, 0);
}
static void illegal_address_in_wait(void) { mock_fail("cudaEventQuery", 0, cudaErrorIllegalAddress, 1); }
static void kernel_fault(void) { mock_fault_kernel((cudaStream_t)gpu_compute_stream(), cudaErrorIllegalAddress); }
static void range_outside(void) { gpu_grad_comm_ready(job.g, N - 1, 2); }
static void finalize_stuck(void) { mock.finalize_polls = -1; }
static void destroy_fails(void) { mock_fail("ncclCommDestroy", 0, ncclInternalError, 0); }
static void no_cublas(void) { mock_fail("cublasCreate", 0, CUBLAS_STATUS_NOT_INITIALIZED, 0); }
static void bad_precision(void) { gpu_blas_init("fp16"); }
static void bad_gemm(void)
{
    static float a[4], b[4], c[4];
    gpu_gemm(0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2); /* lda 1 < k */
}

/* A step whose by-value lr or key is not the pair bound for it: a replayed graph would use the bound one. */
static void lr_not_bound(void)
{
    static float p[1];
    const nn_backend *be = nn_cuda(0);
    be->step_scalars(0.5f, 7);
    be->sgd_step(p, p, p, 1, 0.25f, 0.0f, 0.0f, NULL);
}
static void key_not_bound(void)
{
    static float x[1];
    static uint64_t ids[1];
    const nn_backend *be = nn_cuda(0);
    be->step_scalars(0.5f, 7);
    be->dropout_forward(x, x, 1, 1, ids, 8, 0, 0.5f);
}

/* ---- Cases ------------------------------------------------------------------------------------ */

#define STEP "at step 7"
#define PEER "a peer rank died, stalled or diverged"
static const failure cases[] = {
    /* src/gpu/cuda/device.cu */
    {"busy GPU", AT_START, busy_gpu, EAGER_COMM, 1, EX_UNAVAILABLE, "is in exclusive-process compute mode", 0},
    {"busy GPU, context at cudaFree", AT_START, busy_gpu_old_runtime, EAGER_COMM, 1, EX_UNAVAILABLE,
     "is in exclusive-process compute mode", 0},
    {"ECC error at bind", AT_START, ecc_at_bind, EAGER_COMM, 1, EX_UNAVAILABLE,
     "cudaSetDevice(info->device) failed: cudaErrorECCUncorrectable (mock error): a hardware fault", 0},
    {"probe fails", AT_START, no_properties, EAGER_COMM, 1, EX_SOFTWARE,
     "cudaGetDeviceProperties(&prop, info->device) failed: cudaErrorInvalidDevice", 0},
    {"bound twice", AT_BIND, bind_twice, EAGER_COMM, 1, EX_SOFTWARE, "gpu_bind: device 0 is already bound", 0},
    {"communicator before bind", AT_START, comm_before_bind, EAGER_COMM, 1, EX_SOFTWARE,
     "gpu_comm_init: no device bound", 0},
    /* src/gpu/cuda/gemm_cublas.cu */
    {"cuBLAS unavailable", AT_BIND, no_cublas, EAGER_COMM, 1, EX_UNAVAILABLE, "cublasCreate(&handle) failed", 0},
    {"unknown precision", AT_BIND, bad_precision, EAGER_COMM, 1, EX_USAGE, "--precision fp16: expected fp32", 0},
    /* src/gpu/cuda/step_scalars.cu */
    {"lr unlike the bound one", AT_STEP, lr_not_bound, EAGER_COMM, 5, EX_SOFTWARE,
     "an optimizer step with lr 0.25 where 0.5 was bound", 0},
    {"dropout key unlike the bound one", AT_STEP, key_not_bound, EAGER_COMM, 5, EX_SOFTWARE,
     "a dropout with key 0000000000000008 where 0000000000000007 was bound", 0},
    {"GEMM rejected", AT_STEP, bad_gemm, EAGER_COMM, 1, EX_SOFTWARE, "cublasSgemm(h, ta, tb", 0},
    /* src/gpu/cuda/nccl_comm.cu: start-up */
    {"no unique ID", AT_BIND, no_unique_id, EAGER_COMM, 1, EX_UNAVAILABLE, "ncclGetUniqueId(&u) failed", 0},
    {"init rejected", AT_BIND, init_rejected, EAGER_COMM, 1, EX_SOFTWARE,
     "NCCL communicator initialisation (ncclCommInitRankConfig) at start-up failed: ncclResult 4", 0},
    {"init error", AT_BIND, init_error, EAGER_COMM, 5, EX_UNAVAILABLE,
     "NCCL communicator initialisation (ncclCommInitRankConfig) at start-up failed: ncclResult 2", 1},
    {"init timeout", AT_BIND, init_never, EAGER_COMM, 0.2, EX_UNAVAILABLE,
     "(ncclCommInitRankConfig) at start-up did not complete within --comm-timeout 0.2 s: a rank did not start", 1},
    {"init poll fails", AT_BIND, init_poll_fails, EAGER_COMM, 5, EX_SOFTWARE,
     "(ncclCommInitRankConfig) at start-up failed: ncclResult 3", 1},
    {"broadcast hangs", AT_BCAST, hang, EAGER_COMPUTE, 0.2, EX_UNAVAILABLE,
     "NCCL broadcast of initial parameters at start-up did not complete within --comm-timeout 0.2 s: " PEER, 1},
    {"ECC error in the broadcast", AT_BCAST, ecc_in_wait, EAGER_COMM, 5, EX_UNAVAILABLE,
     "waiting for the broadcast of initial parameters (cudaEventQuery) failed: cudaErrorECCUncorrectable", 1},
    {"out of memory", AT_CREATE, out_of_memory, EAGER_COMM, 5, EX_UNAVAILABLE,
     "cudaMalloc((void **)&scratch, n * sizeof(float)) failed: cudaErrorMemoryAllocation (mock error): out of GPU "
     "memory",
     0},
    /* src/gpu/cuda/nccl_comm.cu: the gradient all-reduce */
    {"all-reduce rejected", AT_STEP, allreduce_rejected, EAGER_COMM, 5, EX_SOFTWARE,
     "NCCL gradient all-reduce " STEP " failed: ncclResult 5", 1},
    {"enqueue stuck", AT_STEP, enqueue_stuck, EAGER_COMM, 0.2, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " did not complete within --comm-timeout 0.2 s: " PEER, 1},
    {"enqueue ends in an error", AT_STEP, enqueue_error, EAGER_COMM, 5, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " failed: ncclResult 6", 1},
    {"peer dies", AT_STEP, hang, EAGER_COMPUTE, 0.2, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " did not complete within --comm-timeout 0.2 s: " PEER, 1},
    {"remote error", AT_STEP, async_error, EAGER_COMM, 10, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " failed: ncclResult 6", 1},
    {"internal error", AT_STEP, async_internal_error, EAGER_COMPUTE, 10, EX_SOFTWARE,
     "NCCL gradient all-reduce " STEP " failed: ncclResult 3", 1},
    {"wait poll fails", AT_STEP, wait_poll_fails, EAGER_COMM, 10, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " failed: ncclResult 1", 1},
    {"illegal address in the wait", AT_FINISH, illegal_address_in_wait, EAGER_COMPUTE, 5, EX_SOFTWARE,
     "waiting for the gradient all-reduce (cudaEventQuery) failed: cudaErrorIllegalAddress", 1},
    /* The fault sits on the lagging compute stream and runs while the host polls. */
    {"kernel fault, seen in the wait", AT_FINISH, kernel_fault, EAGER_COMM, 5, EX_SOFTWARE,
     "waiting for the gradient all-reduce (cudaEventQuery) failed: cudaErrorIllegalAddress", 1},
    /* The fault runs at once; the next runtime call reports it. */
    {"kernel fault, seen at the next call", AT_FINISH, kernel_fault, EAGER_COMPUTE, 5, EX_SOFTWARE,
     "cudaEventRecord(g->bwd_end[slot], c->compute) failed: cudaErrorIllegalAddress", 0},
    {"range outside the gradients", AT_FINISH, range_outside, EAGER_COMM, 5, EX_SOFTWARE,
     "gradient range [999, 1001) reported ready lies outside the 1000 gradients", 0},
    {"peer dies, buckets in flight at free", AT_IN_FLIGHT, hang, EAGER_COMM, 0.2, EX_UNAVAILABLE,
     "NCCL gradient all-reduce " STEP " did not complete within --comm-timeout 0.2 s: " PEER, 1},
    /* src/gpu/cuda/nccl_comm.cu: shutdown */
    {"finalize stuck", AT_SHUTDOWN, finalize_stuck, EAGER_COMM, 0.2, EX_UNAVAILABLE,
     "NCCL communicator shutdown (ncclCommFinalize) " STEP " did not complete within --comm-timeout 0.2 s", 1},
    {"destroy fails", AT_SHUTDOWN, destroy_fails, EAGER_COMM, 5, EX_SOFTWARE, "ncclCommDestroy(c->comm) failed", 0},
};
enum { NCASES = sizeof cases / sizeof *cases };

/* ---- The job and its exit --------------------------------------------------------------------- */

static const failure *cur;
static FILE *captured; /* this process's stderr */
static int real_stderr;

static void at(int point)
{
    if (cur->at == point)
        cur->inject();
}

/* atexit (die() ends in exit()): the error line names the operation, ncclCommAbort ran when the path
 * must call it, the simulated API was not misused. Otherwise status 97, which Check reports. */
static void check_exit(void)
{
    char text[4096], why[512] = "";
    fflush(stderr);
    rewind(captured);
    size_t n = fread(text, 1, sizeof text - 1, captured);
    text[n] = '\0';
    if (write(real_stderr, text, n) < 0)
        _exit(96);
    if (!strstr(text, cur->says))
        snprintf(why, sizeof why, "the error line does not say '%s'", cur->says);
    else if (cur->abort && !mock.abort_called)
        snprintf(why, sizeof why, "no ncclCommAbort before exit");
    else if (mock.violations)
        snprintf(why, sizeof why, "API misuse: %s", mock.violation);
    if (!*why)
        return;
    dprintf(real_stderr, "case '%s': %s\n", cur->name, why);
    _exit(97);
}

static void run_job(void)
{
    char why[GPU_MSG_LEN];
    at(AT_START);
    ck_assert_int_eq(gpu_probe(0, &job.info, why, sizeof why), 0);
    gpu_bind(&job.info);
    at(AT_BIND);
    gpu_blas_init("fp32");
    unsigned char id[GPU_NCCL_ID_BYTES];
    gpu_nccl_unique_id(id);
    job.c = gpu_comm_init(id, 2, 0, cur->timeout_s);
    ck_assert_int_eq(cudaMalloc((void **)&job.d, N * sizeof *job.d), cudaSuccess);
    at(AT_BCAST);
    gpu_comm_broadcast(job.c, job.d, N, 0, "initial parameters");
    at(AT_CREATE);
    job.g = gpu_grad_comm_create(job.c, job.d, N, N / 2 * sizeof(float));
    gpu_grad_comm_arm(job.g, 1, 7);
    at(AT_STEP);
    at(AT_IN_FLIGHT);
    cudaMemsetAsync(job.d, 0, N * sizeof *job.d, (cudaStream_t)gpu_compute_stream()); /* backward */
    gpu_grad_comm_ready(job.g, N / 2, N / 2);
    gpu_grad_comm_ready(job.g, 0, N / 2);
    at(AT_FINISH);
    if (cur->at != AT_IN_FLIGHT) { /* else the job stops with both buckets in flight */
        gpu_grad_comm_finish(job.g);
        gpu_wait_compute(); /* the trainer's read-back (log interval): gpu_grad_comm_settle */
    }
    gpu_grad_comm_free(job.g);
    at(AT_SHUTDOWN);
    gpu_comm_free(job.c);
    gpu_blas_free();
    gpu_release();
}

START_TEST(test_failure)
{
    cur = &cases[_i];
    mock_reset(cur->policy);
    fflush(stderr);
    real_stderr = dup(2);
    captured = tmpfile();
    ck_assert_msg(real_stderr >= 0 && captured && dup2(fileno(captured), 2) == 2, "cannot capture stderr");
    atexit(check_exit);
    run_job();
    ck_abort_msg("case '%s': the job did not stop", cur->name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_errors");
    TCase *tc = tcase_create("gpu_errors");
    tcase_set_timeout(tc, 30);
    for (int i = 0; i < NCASES; i++)
        tcase_add_loop_exit_test(tc, test_failure, cases[i].code, i, i + 1);
    suite_add_tcase(s, tc);
    return check_run(s);
}
