/* The GPU path's C interface (CUDA runtime + NCCL), for main.c and train.c.
 *
 * Two layers:
 * - MPI-free functions, implemented in src/gpu/cuda/: device.cu, nccl_comm.cu and gemm_cublas.cu (nvcc
 *   never sees mpi.h);
 * - collective entry points taking the ddp_env (src/gpu/gpu_mpi.c, compiled by mpicc): they exchange
 *   what the MPI-free layer needs (PCI bus IDs, NCCL's unique ID, error messages) over MPI.
 *
 * CPU-only build (configure without CUDA): src/gpu/gpu_none.c. gpu_available() and gpu_decide() say there
 * is no GPU path (CPU, or die 69 for --device cuda). The entry points main.c and train.c call after
 * gpu_decide() (gpu_select, gpu_describe, gpu_report, gpu_blas_*, gpu_release, nn_cuda, comm_nccl) are
 * stubs that stop with EX_SOFTWARE, never reached. The rest is not built (tests of it are GPU-build only).
 *
 * Order of calls (GPU build), every one collective over all ranks unless marked local:
 *   gpu_decide(env, want_cuda)                 after options_parse: 1 = GPUs, 0 = CPU
 *   gpu_select(env, &info)                      device choice + duplicate check, then binds the device
 *   gpu_describe(&info, buf, len)     (local)   the device column of bootstrap_report()
 *   gpu_report(env, &info)                      rank 0 prints the GPU table
 *   gpu_blas_init(o->precision)       (local)   cuBLAS on the compute stream; then gpu_gemm() = gemm()
 *   c = gpu_comm_create(env, o->bootstrap_addr, o->comm_timeout)
 *   gpu_comm_broadcast(c, dev_params, n, 0, "initial parameters")
 *   g = gpu_grad_comm_create(c, dev_grads, n, bucket_bytes)
 *   model_set_grad_hook(m, gpu_grad_comm_ready, g)
 *   per optimizer step: gpu_grad_comm_arm(g, last_micro_batch, step) per micro-batch; backward (hooks);
 *                       gpu_grad_comm_finish(g); optimizer kernels on gpu_compute_stream()
 *   per log interval: the loss read-back, whose wait is gpu_grad_comm_settle(g) (gpu_wait_compute)
 *   gpu_comm_average(c, dev_bn_stats, nb, "BatchNorm statistics")
 *   gpu_grad_comm_free(g); gpu_comm_free(c); gpu_blas_free(); gpu_profile_release(); gpu_release()
 * Every kernel and cuBLAS call of the trainer must run on gpu_compute_stream(): the all-reduce orders
 * itself after backward with events recorded on that stream. NN_CUDA_FORKED's side stream forks from it and
 * joins it again before a layer's gradients are ready.
 */
#ifndef MNIST_GPU_H
#define MNIST_GPU_H
#include <stddef.h>

#include "comm/comm_plan.h"
#include "gpu/gpu_plan.h"
#ifndef __CUDACC__
#include "comm/bootstrap.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { GPU_NCCL_ID_BYTES = 128 }; /* NCCL_UNIQUE_ID_BYTES, checked in nccl_comm.cu */

/* ---- The GPU path's tables for the trainer: the model's backend and the collectives --------------- */
struct nn_backend;   /* src/nn/backend.h */
struct comm_backend; /* src/comm/comm.h */
/* The CUDA backend's paths behind a switch (the variants of src/train/options.h,
 * docs/gpu.md#variants-for-measurement):
 * - NN_CUDA_CONV1_DIRECT: conv1 as one kernel and one reduction (conv1_bias_relu_forward, conv_backward) instead
 *   of im2col, GEMMs and bias passes;
 * - NN_CUDA_HEAD_FUSED: net's training head as one kernel (head_train);
 * - NN_CUDA_POOL_FUSED: conv2's pool with dropout1's flatten and dropout in one pass, its backward with conv2's
 *   bias gradient in one reduction, conv1's ReLU backward in conv2's col2im (pool_flatten_dropout_forward,
 *   dropout_pool_backward_sum, col2im_relu);
 * - NN_CUDA_CONV2_DIRECT: conv2 with its pool as three kernels without a column buffer (conv_pool_forward,
 *   pool_conv_backward; src/gpu/conv_pool_kernels.h);
 * - NN_CUDA_TF32: --precision tf32's part of the kernels, conv2 direct's forward and input gradient on tensor
 *   cores (cuBLAS has its own setting);
 * - NN_CUDA_3XTF32: those two on tensor cores in the other precisions, three products each;
 * - NN_CUDA_FORKED: a linear layer's weight gradient on a second stream, beside its input gradient (side_fork,
 *   gemm_side, side_join);
 * - NN_CUDA_FC_EPILOGUE: a linear layer's forward as one cuBLASLt matmul with its bias and ReLU as epilogue
 *   (linear_forward). */
enum {
    NN_CUDA_CONV1_DIRECT = 1,
    NN_CUDA_HEAD_FUSED = 2,
    NN_CUDA_POOL_FUSED = 4,
    NN_CUDA_CONV2_DIRECT = 8,
    NN_CUDA_TF32 = 16,
    NN_CUDA_3XTF32 = 32,
    NN_CUDA_FORKED = 64,
    NN_CUDA_FC_EPILOGUE = 128,
    NN_CUDA_SWITCHES = 256
};

/* The CUDA backend with the paths of `switches` (NN_CUDA_*); after gpu_select() and gpu_blas_init(). */
const struct nn_backend *nn_cuda(unsigned switches);
/* The NCCL collectives (GPU build: src/gpu/gpu_mpi.c); after gpu_select(). The CPU-only build has stubs for
 * both tables that stop with EX_SOFTWARE (src/gpu/gpu_none.c): gpu_decide() never chooses the GPU there. */
const struct comm_backend *comm_nccl(void);

/* One rank's GPU, for the start-up table. */
typedef struct {
    int device;                            /* index among the devices this rank sees: local_rank % visible */
    int visible;                           /* devices this rank sees (cudaGetDeviceCount) */
    char name[256];                        /* "NVIDIA H100 80GB HBM3" (cudaDeviceProp.name) */
    char pci_bus_id[GPU_BUS_ID_LEN];       /* cudaDeviceGetPCIBusId: "0000:3B:00.0" */
    char visible_devices[GPU_VISIBLE_LEN]; /* CUDA_VISIBLE_DEVICES, "(unset)" when not set */
    int cc_major, cc_minor;                /* compute capability */
    size_t total_mem;                      /* bytes */
    int driver_version, runtime_version;   /* cudaDriverGetVersion / cudaRuntimeGetVersion: 13000 = 13.0 */
    int nccl_version;                      /* ncclGetVersion: 22809 = 2.28.9 */
} gpu_info;

/* ---- Device (src/gpu/cuda/device.cu): local, no MPI -------------------------------------------------- */

/* 1 when this process can use a GPU (cudaGetDeviceCount succeeds with n > 0); otherwise 0 and one line
 * in why (may be NULL): no driver, driver too old, CUDA_VISIBLE_DEVICES empty, no device, CUDA error.
 * Creates no context. CPU-only build: 0, "this build has no GPU path (configure --with-cuda)". */
int gpu_available(char *why, size_t len);

/* Before MPI_Init, in main: binds device local % visible, local being the launcher's local rank
 * (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID or PMI_LOCAL_RANK, the first set). So a
 * CUDA-aware MPI that creates a context inside MPI_Init creates it on this rank's GPU, not on GPU 0.
 * Nothing when no variable is set or no GPU is usable. CPU-only build: a no-op. */
void gpu_choose_early(void);
/* The device gpu_choose_early() bound (-1: none), the variable and local rank it used. GPU build only;
 * gpu_select() stops the job (78) when MPI's node-local rank chooses another device. */
int gpu_early_device(const char **var, long *local_rank);

/* Fills info for device local_rank % visible without creating a context (no cudaSetDevice). Returns 0,
 * or -1 with why when no GPU is usable. GPU build only. */
int gpu_probe(int local_rank, gpu_info *info, char *why, size_t len);

/* cudaSetDevice(info->device) (creates the context), and the compute stream. Dies 69 when the device is
 * busy (exclusive-process mode). Called by gpu_select(); once per process. GPU build only. */
void gpu_bind(const gpu_info *info);

/* The bound device index, -1 before gpu_bind(). GPU build only. */
int gpu_bound_device(void);

/* The stream every kernel, copy and cuBLAS call of the trainer runs on (a cudaStream_t; blocking with
 * respect to the legacy default stream, lowest priority). NULL before gpu_bind(). GPU build only. */
void *gpu_compute_stream(void);

/* NN_CUDA_FORKED: a second stream of the compute stream's priority, created at the first call (before any
 * step). gpu_side_fork() makes it wait for what the compute stream has queued; gpu_side_join() makes the compute
 * stream wait for what it has queued. Inside a capture they are the graph's fork and join edges. GPU build only. */
void *gpu_side_stream(void);
void gpu_side_fork(void);
void gpu_side_join(void);

/* Waits on the host for everything queued on the compute stream: through the function set by
 * gpu_set_compute_wait (the gradient all-reduce's: deadline, NCCL errors), else cudaStreamSynchronize.
 * Every host wait of the CUDA backend (upload, download, count_correct) is this one. GPU build only. */
void gpu_wait_compute(void);
/* Our launch wrappers and gpu_wait_compute() count what they do (src/gpu/cuda/nn_cuda.cu's kernels, gpu_gemm's
 * cuBLAS calls, host waits); nn_cuda()'s counts entry reads them. GPU build only. */
void gpu_count_kernel(void);
void gpu_count_gemm(void);
void gpu_counted(long *kernels, long *gemms, long *waits);
/* wait(ctx) becomes gpu_wait_compute(); NULL restores cudaStreamSynchronize. GPU build only. */
void gpu_set_compute_wait(void (*wait)(void *ctx), void *ctx);

/* A CUDA graph of the work queued on the compute stream (and the streams that join it through events)
 * between gpu_graph_begin and gpu_graph_end: the trainer's replayable step (docs/gpu.md).
 * - begin: 0, or -1 with the failed call and its error in why (nothing captures);
 * - end: the instantiated graph, or NULL with why (the capture is over either way; what was queued in it did
 *   not run).
 * Launches and GEMMs queued while capturing count when the graph is launched (gpu_counted). GPU build only. */
typedef struct gpu_graph gpu_graph;
int gpu_graph_begin(char *why, size_t len);
gpu_graph *gpu_graph_end(char *why, size_t len);
void gpu_graph_launch(gpu_graph *g);
void gpu_graph_free(gpu_graph *g); /* NULL: a no-op */
int gpu_capturing(void);           /* 1 between a successful gpu_graph_begin and gpu_graph_end */

/* --profile on the GPU (src/gpu/cuda/profile_clock.cu): the clock for profile_use_clock. graphs 0: CUDA events
 * on the compute stream (eager steps only); 1: stamp kernels, which a captured step keeps, so replayed steps are
 * timed too. Either is read around the host's own waits (gpu_set_wait_hooks). After gpu_select();
 * gpu_profile_release() frees it, before gpu_release(). CPU-only build: stubs. */
const struct profile_clock *gpu_profile_clock(int graphs);
void gpu_profile_release(void);
/* Called by gpu_wait_compute() before and after each wait (NULL: nothing). GPU build only. */
void gpu_set_wait_hooks(void (*before)(void), void (*after)(void));
/* Seconds per node of a graph of `nodes` empty kernels on the compute stream, replayed `replays` times: what a node
 * costs by itself (launch, dependency, a block's start), beside the step's nodes. Waits for the device. CPU-only
 * build: a stub. */
double gpu_node_cost_s(int nodes, int replays);

/* "cuda:0 (0000:3B:00.0)": the device column of bootstrap_report(). CPU-only build: a stub. */
void gpu_describe(const gpu_info *info, char *buf, size_t len);

/* Destroys the compute stream; after gpu_comm_free(). */
void gpu_release(void);

/* ---- cuBLAS (src/gpu/cuda/gemm_cublas.cu): local ---------------------------------------------------------- */

/* The cuBLAS handle, bound to the compute stream; after gpu_select(). precision: "fp32" (full fp32),
 * "tf32" (cublasSetMathMode CUBLAS_TF32_TENSOR_OP_MATH), "bf16" (cublasGemmEx, compute
 * CUBLAS_COMPUTE_32F_FAST_16BF; data stays fp32). Dies 64 on another value. CPU-only build: a stub. */
void gpu_blas_init(const char *precision);
/* gemm() of gemm.h on device pointers: row-major C[m][n] = alpha op(A) op(B) + beta C, queued on the
 * compute stream, through gemm_colmajor(). GPU build only. */
void gpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc);
/* NN_CUDA_FORKED: a second handle on the side stream (gpu_side_stream), for gpu_gemm_side(), which is gpu_gemm()
 * queued there. After gpu_blas_init(); GPU build only. */
void gpu_blas_side_init(void);
void gpu_gemm_side(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                   int ldb, float beta, float *c, int ldc);
/* NN_CUDA_FC_EPILOGUE: a cuBLASLt handle and its workspace, for gpu_linear_lt(), which is linear_forward of
 * layers.h (and its ReLU where relu) as one matmul on the compute stream: 1, or 0 having done nothing where
 * cuBLASLt has no algorithm for the shape (warned once). After gpu_blas_init(); GPU build only. */
void gpu_blas_lt_init(void);
int gpu_linear_lt(const float *x, const float *w, const float *b, float *y, int N, int in, int out, int relu);
/* Destroys the handles (before gpu_release()). CPU-only build: a stub. */
void gpu_blas_free(void);

/* ---- NCCL (src/gpu/cuda/nccl_comm.cu): no MPI; gpu_comm_create() below is the entry --------------------- */

typedef struct gpu_comm gpu_comm;

/* ncclGetUniqueId into id (rank 0 only; it starts NCCL's bootstrap root when NCCL_COMM_ID is unset). */
void gpu_nccl_unique_id(unsigned char id[GPU_NCCL_ID_BYTES]);
/* Non-blocking ncclCommInitRankConfig on the bound device, waited for with a deadline of timeout_s
 * (ncclCommAbort and die 69 on error or timeout). Creates the communication stream. */
gpu_comm *gpu_comm_init(const unsigned char id[GPU_NCCL_ID_BYTES], int nranks, int rank, double timeout_s);
/* After the first gradient all-reduce, waits end at the shorter of this and timeout_s (comm_wait_deadline). */
void gpu_comm_set_step_timeout(gpu_comm *c, double step_timeout_s);
/* One rank communicates as if it had peers (comm_config's alone): the collectives below and the gradient
 * all-reduce run, are timed and captured instead of being skipped. Before gpu_grad_comm_create. */
void gpu_comm_set_alone(gpu_comm *c);
/* MNIST_DDP_COMM_PROXY (comm.h): each all-reduce of the gradients, and each timed one, followed on the
 * communication stream by the traffic and time the peers' part of a ring would take (comm_kernels.h). Before
 * gpu_grad_comm_create. */
void gpu_comm_set_proxy(gpu_comm *c, const comm_proxy_spec *p);

/* Device-buffer collectives for the trainer, so it never hands device pointers to MPI. Ordered after
 * all work queued on the compute stream, and the compute stream waits for them; the host waits too
 * (deadline, abort + die on error). what names the data in error messages. No-ops with one rank. */
void gpu_comm_broadcast(gpu_comm *c, float *dev, size_t n, int root, const char *what);
/* In-place average over ranks (ncclAvg): BatchNorm running statistics. */
void gpu_comm_average(gpu_comm *c, float *dev, size_t n, const char *what);
/* Seconds per all-reduce (sum, in place) of n floats at dev: the mean of iters back-to-back operations
 * after one warm-up, timed with CUDA events, the maximum over ranks. For benchmarks and the overlap
 * reference; the content of dev is overwritten. 0 with one rank. */
double gpu_comm_time_allreduce(gpu_comm *c, float *dev, size_t n, int iters);
/* Waits (deadline) for outstanding work, ncclCommFinalize + ncclCommDestroy; NULL is a no-op. */
void gpu_comm_free(gpu_comm *c);

/* The gradient all-reduce, mirroring grad_comm (comm.h) for device gradients: sums (ncclSum), not
 * averages; the trainer scales gradients by 1/global batch beforehand, exactly like the CPU path. */
typedef struct gpu_grad_comm gpu_grad_comm;

/* dev_grads: n floats on the bound device (not owned). bucket_bytes: start a bucket once it holds this
 * many bytes (0: one all-reduce per ready range). Measures blocking_s (with more than one rank). */
gpu_grad_comm *gpu_grad_comm_create(gpu_comm *c, float *dev_grads, size_t n, size_t bucket_bytes);
/* Only an armed pass reduces: gradient accumulation arms the last micro-batch only. Never with one rank,
 * unless gpu_comm_set_alone. */
void gpu_grad_comm_arm(gpu_grad_comm *g, int armed, long step);
/* --grad-comm bf16: each bucket narrowed to bfloat16 (base/bf16.h) on the communication stream, reduced with
 * ncclBfloat16 (NCCL adds in fp32 and rounds each sum), widened back; blocking_s measured again. */
void gpu_grad_comm_set_wire_bf16(gpu_grad_comm *g);
/* Model hook (grad_ready_fn), called on the host once the kernels that make gradients
 * [offset, offset + count) final are queued on the compute stream. */
void gpu_grad_comm_ready(void *ctx, size_t offset, size_t count);
/* Starts the remainder and makes the compute stream wait for the last bucket; the host does not wait
 * (unless it is 64 steps ahead of the GPU). The first step costs no host wait between backward and here:
 * the loss stays on the device (model_train_batch). */
void gpu_grad_comm_finish(gpu_grad_comm *g);
/* Waits on the host, with the deadline (ncclCommAbort + die 69 on error or timeout), for everything queued
 * on the compute stream so far, the all-reduces included. It adds their exposed time to the figures.
 * gpu_grad_comm_create() makes it gpu_wait_compute() (until gpu_grad_comm_free()), so every read-back
 * of the backend waits here: the trainer's one host wait per log interval is the loss's. */
void gpu_grad_comm_settle(gpu_grad_comm *g);
/* A finish() queued while the compute stream is captured (gpu_graph_begin) orders the buckets with
 * untimed events and waits nowhere. Each launch of that graph then calls this (step: for error messages).
 * It counts the pass's buckets and keeps the host at most 64 replays ahead of the device (a deadline
 * wait, as finish() does for eager steps). Each replay times itself on the device (end of backward to end
 * of the last bucket); settle adds those to exposed_s and reductions. */
void gpu_grad_comm_replayed(gpu_grad_comm *g, long step);
/* The figures of the reductions settled so far (exposed_s) and posted (reductions, launched, buckets). */
comm_stats gpu_grad_comm_get_stats(const gpu_grad_comm *g);
void gpu_grad_comm_free(gpu_grad_comm *g);

/* ---- Collective entry points (src/gpu/gpu_mpi.c, MPI) -------------------------------------------- */
#ifndef __CUDACC__
/* --device auto (want_cuda 0) or cuda (1). Returns 1 when every rank has a usable GPU, else 0 (CPU).
 * - auto without a GPU on some rank: every rank uses the CPU and rank 0 prints one line naming the first
 *   such rank, its host and why.
 * - cuda without a GPU on some rank: every rank exits 69 (EX_UNAVAILABLE) with that line.
 * - CPU-only build: auto -> 0 with the line "device auto: this build has no GPU path; training on the CPU";
 *   cuda -> exit 69. */
int gpu_decide(const ddp_env *env, int want_cuda);

/* Chooses local_rank % visible and gathers the PCI bus IDs over env->local. It stops every rank (78,
 * EX_CONFIG) when two ranks of a node would share a GPU or a node has more ranks than GPUs, with the
 * #SBATCH/srun options that fix it. Then it binds the device (gpu_bind). CPU-only build: a stub. */
void gpu_select(const ddp_env *env, gpu_info *info);
/* The same, but returns the verdict of the job (GPU_NODE_OK: device bound; otherwise not bound and
 * the message of the first bad node in why, on every rank). For tests. GPU build only. */
gpu_node_verdict gpu_select_try(const ddp_env *env, gpu_info *info, char *why, size_t len);

/* Rank 0 prints one line per rank: rank, host, GPU index, name, bus ID, CUDA_VISIBLE_DEVICES, and the
 * driver/runtime/NCCL versions. CPU-only build: a stub. */
void gpu_report(const ddp_env *env, const gpu_info *info);

/* The NCCL communicator over MPI_COMM_WORLD, after gpu_select(). Bootstrap address: NCCL_COMM_ID from
 * the environment wins (logged); else bootstrap_addr ("HOST:PORT", NULL for NCCL's choice) is exported
 * as NCCL_COMM_ID on every rank. With either, rank 0 first checks that it can bind HOST:PORT and stops
 * every rank (69 port in use, 78 wrong host) instead of letting NCCL hang or fail obscurely. Then rank 0's
 * unique ID is broadcast with MPI and gpu_comm_init() runs with the deadline timeout_s. GPU build only. */
gpu_comm *gpu_comm_create(const ddp_env *env, const char *bootstrap_addr, double timeout_s);
#endif

#ifdef __cplusplus
}
#endif
#endif
