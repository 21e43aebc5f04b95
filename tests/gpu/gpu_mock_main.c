/* mnist_ddp itself (src/main.c, the real trainer and CUDA backend) on the simulated CUDA runtime, cuBLAS
 * and NCCL: kernels are counted and ordered but compute nothing, so only the control flow is real (what the
 * host queues and when it waits), not the numbers. Driven by tests/gpu/gpu-mock-steps.sh.
 *   MOCK_POLICY=comm|compute   which stream runs eagerly (default compute: the all-reduces lag)
 *   MOCK_STEP_REPORT=FILE      rank 0 writes one line per optimizer step there (gpu_mock_steps.c)
 *   MOCK_LAUNCH_REPORT=FILE    rank 0 writes each kernel's grid sizes in the steps there (gpu_mock_steps.c)
 *   MOCK_FAIL=CALL             CALL fails (cudaErrorStreamCaptureUnsupported) on the rank MOCK_FAIL_RANK
 *                              (OMPI_COMM_WORLD_RANK; default 0): a capture that fails on one rank only
 *   MOCK_NO_STEP_SCALARS=1     the CUDA backend without step_scalars (src/nn/backend.h): lr and the dropout key
 *                              by value only, as on a backend that cannot write them to its memory
 * At exit, a misuse of the simulated API (a race between the streams, a call on a communicator still in
 * progress...) is an error: status 97. Every rank prints the device bound when MPI_Init began (-1: none),
 * seen through MPI's profiling interface. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_mock.h"
#include "nn/backend.h"

static int rank = -1, device_at_init = -1;

/* The trainer's nn_cuda (linked with -Wl,--wrap=nn_cuda), less step_scalars with MOCK_NO_STEP_SCALARS=1. */
const nn_backend *__real_nn_cuda(unsigned switches);
const nn_backend *__wrap_nn_cuda(unsigned switches);
const nn_backend *__wrap_nn_cuda(unsigned switches)
{
    static nn_backend by_value;
    const nn_backend *be = __real_nn_cuda(switches);
    const char *off = getenv("MOCK_NO_STEP_SCALARS");
    if (!off || strcmp(off, "1") != 0)
        return be;
    by_value = *be;
    by_value.step_scalars = NULL;
    return &by_value;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    device_at_init = mock.current_device;
    int r = PMPI_Init_thread(argc, argv, required, provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return r;
}

static void report(void)
{
    printf("gpu_mock_train: rank %d: device %d bound before MPI_Init\n", rank, device_at_init);
    printf("gpu_mock_train: rank %d: %ld reads of the step's lr and dropout key, digest %016llx\n", rank,
           mock.scalar_reads, mock.scalar_digest);
    fflush(stdout);
    const char *path = getenv("MOCK_STEP_REPORT");
    if (path && mock.nccl_rank == 0 && mock_step_report(path) != 0) {
        fprintf(stderr, "gpu_mock_train: cannot write %s\n", path);
        _exit(97);
    }
    path = getenv("MOCK_LAUNCH_REPORT");
    if (path && mock.nccl_rank == 0 && mock_launch_report(path) != 0) {
        fprintf(stderr, "gpu_mock_train: cannot write %s (fewer than two optimizer steps?)\n", path);
        _exit(97);
    }
    if (mock.violations) {
        fprintf(stderr, "gpu_mock_train: CUDA/NCCL API misuse (%d): %s\n", mock.violations, mock.violation);
        _exit(97);
    }
}

__attribute__((constructor)) static void start(void)
{
    const char *policy = getenv("MOCK_POLICY");
    mock_reset(policy && strcmp(policy, "comm") == 0 ? EAGER_COMM : EAGER_COMPUTE);
    mock.current_device = -1; /* none bound yet */
    mock.bcast_keep = 1;      /* with --seed 0 every rank holds rank 0's parameters: the broadcast changes nothing */
    const char *fail = getenv("MOCK_FAIL"), *fail_rank = getenv("MOCK_FAIL_RANK"), *me = getenv("OMPI_COMM_WORLD_RANK");
    if (fail && atoi(fail_rank ? fail_rank : "0") == atoi(me ? me : "0"))
        mock_fail(fail, 0, cudaErrorStreamCaptureUnsupported, 0);
    atexit(report);
}
