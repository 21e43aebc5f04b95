/* A simulated CUDA runtime, cuBLAS and NCCL for tests on machines without a GPU: programs linking
 * tests/gpu/gpu_mock_stream.c (streams, events, memory: the scheduler and the race detector) and
 * tests/gpu/gpu_mock.c (devices, NCCL, cuBLAS, injected failures) get the cuda*, cublas* and nccl* functions
 * that the CUDA sources call, without libcudart and libnccl. See tests/gpu/check_gpu_mock.c for what it models. */
#ifndef MNIST_GPU_MOCK_H
#define MNIST_GPU_MOCK_H
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h declares ncclResetDebugInit() */
#include <nccl.h>
#pragma GCC diagnostic pop

/* The kernels the simulation computes (src/gpu/cuda/comm_kernels.h), so their data flow and races are checked like a
 * copy's: OP_NARROW, OP_WIDEN (the bf16 wire: count elements from src to dst); OP_STAMP (value 0: the end of
 * backward, 1: the end of the exchange, on the step_stamps at dst, in the simulation's time: 10 us per
 * operation run, as cudaEventElapsedTime's 0.01 ms); OP_PROXY (the communication proxy: reads count floats at
 * src, writes them to dst); OP_PHASE_STAMP (--profile's stamp of phase value, -1 a mark, on the phase_stamps at
 * dst, src/gpu/cuda/profile_stamps.h, in the same time). */
enum {
    OP_MEMCPY,
    OP_MEMSET,
    OP_WAIT,
    OP_RECORD,
    OP_ALLREDUCE,
    OP_BCAST,
    OP_GEMM,
    OP_FAULT,
    OP_KERNEL,
    OP_NARROW,
    OP_WIDEN,
    OP_STAMP,
    OP_PROXY,
    OP_PHASE_STAMP
};
/* What a kernel reads of the step's scalars (mock_op's reads). */
enum { MOCK_READS_NONE, MOCK_READS_KEY, MOCK_READS_LR };
/* Scheduling policies: which stream runs as early as it can while the other lags. */
enum { EAGER_COMM, EAGER_COMPUTE };
enum { MOCK_STREAMS = 16 };

typedef struct {
    int kind;
    int hang; /* a collective whose peer is gone: never completes */
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    struct CUevent_st *ev;
    long gen;
    struct CUstream_st *wait_stream;
    long wait_pos;
    float *buf;
    size_t count;
    int half;              /* a collective's elements are bfloat16 (ncclBfloat16), not float */
    size_t moved;          /* OP_PROXY: floats it moves */
    unsigned long long ns; /* OP_PROXY: nanoseconds it holds */
    ncclRedOp_t redop;
    int root, rank;
    cudaError_t fault; /* OP_FAULT: the sticky error the kernel raises */
    int staged;        /* OP_MEMCPY: src is the simulation's copy of a pageable host source, freed once run */
    /* OP_KERNEL of a kernel that reads the step's scalars (src/gpu/kernels.h's kern_scalars): which one (reads),
     * the address it was given (NULL: none bound) and its by-value argument (a float's bits for lr) */
    int reads;
    const void *scalars;
    uint64_t by_value;
    /* column-major GEMM, as cuBLAS received it */
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
    const float *bias; /* cuBLASLt's bias epilogue (m values), NULL: none; relu: then its ReLU */
    int relu;
} mock_op;

/* Both of our streams are non-blocking; the communication stream is the one with the highest priority
 * (cudaDeviceGetStreamPriorityRange of the simulation: least 0, greatest -5). */
#define MOCK_IS_COMM(s) ((s)->priority < 0)

/* Happens-before: vc[t] operations of stream t (by position) complete before the next operation here. */
struct CUstream_st {
    unsigned flags;
    int priority, id;
    mock_op *q;
    long n, cap, done;
    long vc[MOCK_STREAMS];
    struct CUgraph_st *capture; /* the open capture it belongs to (gpu_mock_graph.c), NULL: none */
};

struct CUevent_st {
    unsigned flags;
    int destroyed;
    struct CUstream_st *s; /* NULL: never recorded */
    long pos, gen, time;
    long waited;                /* the gen of the last record a host wait counted (a polling loop is one wait) */
    long vc[MOCK_STREAMS];      /* what completes before the last record */
    struct CUgraph_st *capture; /* recorded in this capture, as its node cap_idx (not on a stream) */
    long cap_idx;
};

struct ncclComm {
    int rank, nranks;
    ncclResult_t state, next;
    long pending; /* polls left in ncclInProgress; -1: forever */
    int aborted, finalized;
};

typedef struct {
    int policy;
    int count, driver;
    cudaError_t count_err;
    int current_device;
    long time;
    struct CUstream_st *streams[MOCK_STREAMS];
    int nstreams;
    long host_vc[MOCK_STREAMS]; /* what the host has seen complete (event query, synchronise) */
    cudaError_t sticky;         /* a device fault: every later runtime call returns it */
    struct {
        const char *call; /* the function that fails, NULL: none */
        long skip;        /* calls that still succeed first */
        int err;          /* cudaError_t, ncclResult_t or cublasStatus_t */
        int sticky;       /* a CUDA error that corrupts the context */
    } fail;
    /* NCCL behaviour */
    long init_polls, coll_polls; /* ncclInProgress polls after init / each collective; -1 forever */
    long finalize_polls;
    ncclResult_t init_result, coll_result; /* state init / a collective ends in */
    long async_error_after;                /* polls while running before async_error; -1 never */
    ncclResult_t async_error;
    int hang_collectives; /* collectives never complete */
    float peer_max;       /* the other rank's values in a max all-reduce */
    int init_blocking_seen, init_device_seen, comm_flags_ok, comm_priority_seen;
    unsigned long long graph_flags_seen; /* the last cudaGraphInstantiate's flags */
    int compute_flags_ok;                /* the compute stream was created non-blocking */
    char module_loading[16];             /* CUDA_MODULE_LOADING at the first runtime call ("" unset) */
    int abort_called, violations, collectives;
    long polls_running;
    char violation[256];
    int use_visible_devices;                     /* count and bus IDs follow CUDA_VISIBLE_DEVICES (physical indices) */
    unsigned char last_id[NCCL_UNIQUE_ID_BYTES]; /* the unique ID the last init received */
    /* cuBLAS */
    int blas_handles, gemms, gemm_ex_calls;
    cublasMath_t blas_math;
    cublasComputeType_t gemm_ex_compute;
    int blas_on_compute_stream; /* the handle's stream is the compute stream */
    int lt_handles, lt_objects; /* cuBLASLt handles and descriptors alive (tests/gpu/gpu_mock_lt.c) */
    long lt_matmuls, lt_heuristics;
    cublasComputeType_t lt_compute; /* the last heuristic query's */
    /* What the host did, counted (and traced for mock_step_report): kernel launches, host waits (a
     * synchronising call or an event poll that finds device work pending), device and pinned allocations. */
    long launches, waits, allocs;
    long graph_launches;        /* cudaGraphLaunch calls */
    struct CUgraph_st *capture; /* the open stream capture, NULL: none */
    int bcast_keep;             /* a broadcast leaves the data as it is (every rank holds the same) */
    long proxies;               /* communication proxy kernels run */
    size_t proxy_moved;         /* the last one's floats moved, read, and nanoseconds */
    size_t proxy_read;
    unsigned long long proxy_ns;
    int nccl_rank; /* of the last communicator initialised */
    /* The lr and dropout keys the kernels read when they ran (mock_op's reads), in order: how many, and their
     * FNV-1a digest (a graph replaying a stale value changes it) */
    long scalar_reads;
    unsigned long long scalar_digest;
} gpu_mock_state;

/* Trace kinds (tests/gpu/gpu_mock_steps.c). */
enum { TR_LAUNCH, TR_GEMM, TR_WAIT, TR_ALLOC, TR_MEMSET, TR_ALLREDUCE, TR_GRAPH, TR_COPY, TR_GRAPH_COPY, TR_OPTIM };
void mock_trace(int kind, const void *p, size_t bytes);
/* Writes one line per optimizer step of the traced run to path (see gpu_mock_steps.c); 0 or -1. */
int mock_step_report(const char *path);
/* Writes each kernel's grid sizes in the traced run's steps to path (see gpu_mock_steps.c); 0 or -1. */
int mock_launch_report(const char *path);

extern gpu_mock_state mock;

/* Defaults: 2 devices, driver 13.0, init in progress for 3 polls, collectives complete at once, the
 * peer's values in a max all-reduce 0.25. */
void mock_reset(int policy);
/* From now on, call fails with err after skip successful calls (sticky: a CUDA error that every later
 * runtime call returns too, like cudaErrorIllegalAddress). */
void mock_fail(const char *call, long skip, int err, int sticky);
/* A kernel on s that faults when it runs: e becomes sticky, reported by the calls after it ran. */
void mock_fault_kernel(cudaStream_t s, cudaError_t e);

/* Stream capture (gpu_mock_graph.c). mock_enqueue on a capturing stream records o in its graph; event
 * records and waits that involve a capture go to mock_graph_record / mock_graph_wait; mock_trace keeps
 * what is traced while capturing with the graph (nonzero: taken). A host wait, or an allocation outside
 * relaxed mode, while a capture is open: mock_capture_refuse invalidates it and returns the error
 * (cudaSuccess when no capture is open). */
cudaError_t mock_graph_add(struct CUstream_st *s, mock_op o);
cudaError_t mock_graph_record(struct CUevent_st *e, struct CUstream_st *s);
cudaError_t mock_graph_wait(struct CUstream_st *s, struct CUevent_st *e);
int mock_graph_trace(int kind, const void *p, size_t bytes);
cudaError_t mock_capture_refuse(const char *call, int alloc);

/* For the simulation's own files. */
void mock_violate(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The injected failure for call (0: none), counting the call. */
int mock_injected(const char *call);
/* What a CUDA runtime call returns before doing anything: the sticky error, or its injected failure. */
cudaError_t mock_cuda_status(const char *call);
/* cuBLAS's GEMM (column-major, ta/tb: transposed) checked as cuBLAS checks it, counted, traced and queued on s;
 * bias (m values, NULL: none) and relu: cuBLASLt's epilogue. */
cublasStatus_t mock_gemm(cudaStream_t s, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc, const float *bias, int relu);
/* Whether p lies in pinned host memory (cudaMallocHost, cudaHostAlloc; gpu_mock.c). */
int mock_is_pinned(const void *p);
/* Queues o on s after checking it against unordered work of the other streams (a race is a violation). */
cudaError_t mock_enqueue(struct CUstream_st *s, mock_op o);

#endif
