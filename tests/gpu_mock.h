/* A simulated CUDA runtime and NCCL for tests on machines without a GPU (tests/gpu_mock.c defines the
 * cuda* and nccl* functions cuda/device.cu and cuda/comm_nccl.cu call; programs using it link without
 * libcudart and libnccl). See tests/check_gpu_mock.c for what it models. */
#ifndef MNIST_GPU_MOCK_H
#define MNIST_GPU_MOCK_H
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h declares ncclResetDebugInit() */
#include <nccl.h>
#pragma GCC diagnostic pop

enum { OP_MEMCPY, OP_MEMSET, OP_WAIT, OP_RECORD, OP_ALLREDUCE, OP_BCAST, OP_HANG, OP_GEMM };
/* Scheduling policies: which stream runs as early as it can while the other lags. */
enum { EAGER_COMM, EAGER_COMPUTE };

typedef struct {
    int kind;
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
    ncclRedOp_t redop;
    int root, rank;
    /* column-major GEMM, as cuBLAS received it */
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
} mock_op;

struct CUstream_st {
    unsigned flags;
    int priority;
    mock_op *q;
    long n, cap, done;
};

struct CUevent_st {
    unsigned flags;
    struct CUstream_st *s; /* NULL: never recorded */
    long pos, gen, time;
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
    struct CUstream_st *streams[16];
    int nstreams;
    /* NCCL behaviour */
    long init_polls, coll_polls;           /* ncclInProgress polls after init / each collective; -1 forever */
    ncclResult_t init_result;              /* state init ends in */
    long async_error_after;                /* polls while running before ncclRemoteError; -1 never */
    int hang_collectives;                  /* collectives never complete */
    int init_blocking_seen, init_device_seen, comm_flags_ok, comm_priority_seen;
    int abort_called, violations, collectives;
    long polls_running;
    char violation[256];
    int use_visible_devices;               /* count and bus IDs follow CUDA_VISIBLE_DEVICES (physical indices) */
    unsigned char last_id[NCCL_UNIQUE_ID_BYTES]; /* the unique ID the last init received */
    /* cuBLAS */
    int blas_handles, gemms, gemm_ex_calls;
    cublasMath_t blas_math;
    cublasComputeType_t gemm_ex_compute;
    int blas_on_compute_stream;            /* the handle's stream is the blocking (compute) one */
} gpu_mock_state;

extern gpu_mock_state mock;

/* Defaults: 2 devices, driver 13.0, init in progress for 3 polls, collectives complete at once. */
void mock_reset(int policy);

#endif
