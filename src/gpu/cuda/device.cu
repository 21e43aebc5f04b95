// Device choice and information (no MPI here: src/gpu/gpu_mpi.c gathers and checks across ranks).
// One device per process: the bound device and its compute stream are process state.
#include "config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/cuda/cuda_check.h"
#include "gpu/gpu.h"

static int bound_device = -1;
static cudaStream_t compute_stream = nullptr;

static gpu_probe_status probe_status(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return GPU_PROBE_OK;
    case cudaErrorInsufficientDriver:
        return GPU_PROBE_INSUFFICIENT_DRIVER;
    case cudaErrorNoDevice:
        return GPU_PROBE_NO_DEVICE;
    default:
        return GPU_PROBE_OTHER;
    }
}

// Before the process's first CUDA runtime call (it runs cuInit, which reads this): load every kernel with
// the module. CUDA >= 12.2 defaults to lazy loading, which would load a kernel at its first launch,
// possibly while a collective is in flight, and allocate then. A value the user set wins.
static void before_cuinit(void) { setenv("CUDA_MODULE_LOADING", "EAGER", 0); }

// The device chosen before MPI_Init from the launcher's local rank (gpu_choose_early), -1: none.
static int early_device = -1;
static const char *early_var;
static long early_local;

extern "C" void gpu_choose_early(void)
{
    // Open MPI's first: under mpirun inside a Slurm allocation, SLURM_LOCALID describes mpirun's daemon.
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                                       "PMI_LOCAL_RANK"};
    for (const char *var : vars) {
        const char *s = getenv(var);
        char *end;
        long v = s && *s ? strtol(s, &end, 10) : -1;
        if (v >= 0 && !*end) {
            early_var = var;
            early_local = v;
            break;
        }
    }
    if (!early_var)
        return;
    before_cuinit();
    int count = 0;
    // No GPU, or the device cannot be set (busy, exclusive-process): nothing chosen; gpu_decide() and
    // gpu_select() say why later, in one line for the job.
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return;
    }
    int dev = gpu_plan_device_index((int)early_local, count);
    if (cudaSetDevice(dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    early_device = dev;
}

extern "C" int gpu_early_device(const char **var, long *local_rank)
{
    *var = early_var;
    *local_rank = early_local;
    return early_device;
}

extern "C" int gpu_available(char *why, size_t len)
{
    char scratch[GPU_MSG_LEN], detail[256];
    if (!why || !len) {
        why = scratch;
        len = sizeof scratch;
    }
    int count = 0, driver = 0, runtime = 0;
    before_cuinit();
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); // clear it: the answer "no GPU" is not an error of a later call
        count = 0;
    }
    // Both only report versions: 0 for the driver when there is none; a failure leaves 0, which reads "none".
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess)
        runtime = 0;
    (void)cudaGetLastError();
    snprintf(detail, sizeof detail, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return gpu_plan_usable(probe_status(e), count, driver, runtime, getenv("CUDA_VISIBLE_DEVICES"), detail, why, len);
}

extern "C" int gpu_probe(int local_rank, gpu_info *info, char *why, size_t len)
{
    memset(info, 0, sizeof *info);
    if (!gpu_available(why, len))
        return -1;
    // Property queries only: no cudaSetDevice. So no context exists before the duplicate check but the one
    // gpu_choose_early() made before MPI_Init on the device that gpu_select() then checks; a second context on
    // an exclusive-process GPU would fail with a less helpful message.
    CUDA_CHECK(cudaGetDeviceCount(&info->visible));
    info->device = gpu_plan_device_index(local_rank, info->visible);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, info->device));
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->total_mem = prop.totalGlobalMem;
    CUDA_CHECK(cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, info->device));
    gpu_plan_visible_devices_show(getenv("CUDA_VISIBLE_DEVICES"), info->visible_devices, sizeof info->visible_devices);
    CUDA_CHECK(cudaDriverGetVersion(&info->driver_version));
    CUDA_CHECK(cudaRuntimeGetVersion(&info->runtime_version));
    NCCL_CHECK(ncclGetVersion(&info->nccl_version));
    return 0;
}

// A stream of the lowest priority (NCCL's run above it). Non-blocking: no implicit synchronisation with the
// legacy default stream (which nothing of ours uses: every kernel, copy and cuBLAS call names its stream; the
// simulation rejects stream 0).
static cudaStream_t low_priority_stream(void)
{
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, least));
    return s;
}

extern "C" void gpu_bind(const gpu_info *info)
{
    if (bound_device >= 0)
        die(EX_SOFTWARE, "gpu_bind: device %d is already bound (one device per process)", bound_device);
    cudaError_t e = cudaSetDevice(info->device); // CUDA >= 12 creates the primary context here
    if (e == cudaSuccess)
        e = cudaFree(nullptr); // and older runtimes here
    if (e == cudaErrorDevicesUnavailable)
        die(EX_UNAVAILABLE,
            "GPU %d (%s, %s) is unavailable: it is in exclusive-process compute mode and another "
            "process holds it (nvidia-smi shows which); run one rank per GPU and nothing else on it",
            info->device, info->name, info->pci_bus_id);
    if (e != cudaSuccess)
        cuda_check_fail(e, "cudaSetDevice(info->device)", __FILE__, __LINE__);
    compute_stream = low_priority_stream();
    bound_device = info->device;
}

extern "C" int gpu_bound_device(void) { return bound_device; }

extern "C" void *gpu_compute_stream(void) { return (void *)compute_stream; }

static cudaStream_t side_stream = nullptr;
static cudaEvent_t fork_event, join_event;

extern "C" void *gpu_side_stream(void)
{
    if (!side_stream) {
        side_stream = low_priority_stream();
        CUDA_CHECK(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&join_event, cudaEventDisableTiming));
    }
    return (void *)side_stream;
}

extern "C" void gpu_side_fork(void)
{
    CUDA_CHECK(cudaEventRecord(fork_event, compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(side_stream, fork_event, 0));
}

extern "C" void gpu_side_join(void)
{
    CUDA_CHECK(cudaEventRecord(join_event, side_stream));
    CUDA_CHECK(cudaStreamWaitEvent(compute_stream, join_event, 0));
}

static void (*compute_wait)(void *ctx); // the gradient all-reduce's wait with its deadline, when it exists
static void *compute_wait_ctx;

extern "C" void gpu_set_compute_wait(void (*wait)(void *ctx), void *ctx)
{
    compute_wait = wait;
    compute_wait_ctx = ctx;
}

// --profile's clock (profile_clock.cu) around each wait: its copy queued before, its times read after.
static void (*wait_before)(void), (*wait_after)(void);

extern "C" void gpu_set_wait_hooks(void (*before)(void), void (*after)(void))
{
    wait_before = before;
    wait_after = after;
}

static long kernels_counted, gemms_counted, waits_counted; // gpu_counted(); one thread queues all work
// While a step is captured its launches are the graph's, counted when it is launched (gpu_graph_launch).
static int capturing;
static long kernels_captured, gemms_captured;

extern "C" void gpu_count_kernel(void) { ++*(capturing ? &kernels_captured : &kernels_counted); }
extern "C" void gpu_count_gemm(void) { ++*(capturing ? &gemms_captured : &gemms_counted); }

extern "C" void gpu_counted(long *kernels, long *gemms, long *waits)
{
    *kernels = kernels_counted;
    *gemms = gemms_counted;
    *waits = waits_counted;
}

extern "C" void gpu_wait_compute(void)
{
    waits_counted++;
    if (wait_before)
        wait_before();
    if (compute_wait)
        compute_wait(compute_wait_ctx);
    else
        CUDA_CHECK(cudaStreamSynchronize(compute_stream));
    if (wait_after)
        wait_after(); // --profile's times are on the host now: read them without another wait
}

// ---- CUDA graph of a training step ------------------------------------------------------------------

struct gpu_graph {
    cudaGraphExec_t exec;
    long kernels, gemms; // launched by one replay
};

// A failed capture call leaves its error as the thread's last error: cleared, or the next launch check
// (cudaGetLastError) would stop the run for it.
static int capture_failed(cudaError_t e, const char *call, char *why, size_t len)
{
    snprintf(why, len, "%s: %s", call, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return -1;
}

extern "C" int gpu_graph_begin(char *why, size_t len)
{
    // Relaxed: cuBLAS may allocate its workspace at its first call in a capture; nothing of ours waits in a
    // step (tests/gpu/gpu-mock-steps.sh), and the simulation refuses host waits in any mode.
    cudaError_t e = cudaStreamBeginCapture(compute_stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return capture_failed(e, "cudaStreamBeginCapture", why, len);
    capturing = 1;
    kernels_captured = gemms_captured = 0;
    return 0;
}

extern "C" int gpu_capturing(void) { return capturing; }

extern "C" gpu_graph *gpu_graph_end(char *why, size_t len)
{
    capturing = 0;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaStreamEndCapture(compute_stream, &graph);
    const char *call = "cudaStreamEndCapture";
    if (e == cudaSuccess) {
        call = "cudaGraphInstantiate";
        // Each kernel node keeps the priority of the stream it was captured on: NCCL's kernels and the bf16
        // wire's run ahead of backward's as they do eagerly (without the flag, a replay takes the launch
        // stream's priority for every node).
        e = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    }
    if (graph)
        CUDA_CHECK(cudaGraphDestroy(graph)); // the executable graph is independent of it
    if (e != cudaSuccess) {
        capture_failed(e, call, why, len);
        return nullptr;
    }
    gpu_graph *g = (gpu_graph *)xcalloc(1, sizeof *g);
    *g = gpu_graph{exec, kernels_captured, gemms_captured};
    return g;
}

extern "C" void gpu_graph_launch(gpu_graph *g)
{
    CUDA_CHECK(cudaGraphLaunch(g->exec, compute_stream));
    kernels_counted += g->kernels;
    gemms_counted += g->gemms;
}

extern "C" void gpu_graph_free(gpu_graph *g)
{
    if (!g)
        return;
    CUDA_CHECK(cudaGraphExecDestroy(g->exec)); // a launch in flight completes first (CUDA defers the release)
    free(g);
}

extern "C" void gpu_describe(const gpu_info *info, char *buf, size_t len)
{
    snprintf(buf, len, "cuda:%d (%s)", info->device, info->pci_bus_id);
}

extern "C" void gpu_release(void)
{
    wait_before = wait_after = nullptr;
    if (side_stream) {
        CUDA_CHECK(cudaEventDestroy(fork_event));
        CUDA_CHECK(cudaEventDestroy(join_event));
        CUDA_CHECK(cudaStreamDestroy(side_stream));
    }
    side_stream = nullptr;
    if (compute_stream)
        CUDA_CHECK(cudaStreamDestroy(compute_stream)); // returns at once; resources go when its work is done
    compute_stream = nullptr;
    bound_device = -1;
}
