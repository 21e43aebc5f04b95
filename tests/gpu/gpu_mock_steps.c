/* Kernel launches of nvcc-compiled code in the simulation (they count and order, they compute nothing),
 * and the trace of what the host does, cut into optimizer steps by mock_step_report().
 * A <<<>>> launch compiles to __cudaPushCallConfiguration, __cudaPopCallConfiguration and, with CUDA 13,
 * __cudaGetKernel + __cudaLaunchKernel; the fat binary's functions register at start-up. */
#include "gpu_mock.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels.h"
#include "nn/backend.h"

/* ---- Launches ----------------------------------------------------------------------------------- */

static struct {
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
} pushed;

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *name, int limit,
                            uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *name, int ext, size_t size,
                       int constant, int global);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                               cudaStream_t stream);

/* The kernels the simulation computes, known by their (mangled) names at registration. */
static const void *narrow_fun, *widen_fun, *stamp_bwd_fun, *stamp_end_fun, *proxy_fun, *phase_stamp_fun, *optim_fun[2],
    *set_scalars_fun;

/* The kernels that read the step's scalars (src/gpu/cuda/step_scalars.h), by name: which argument is the
 * kern_scalars pointer, which holds the by-value lr or key, at what offset in it (a struct passed by value). The
 * simulation reads them when the kernel runs (mock_op's reads): a replayed graph shows the values it reads. */
typedef struct {
    const char *name;
    int reads, scalars, arg;
    size_t offset;
} scalar_kernel;
static const scalar_kernel scalar_kernels[] = {
    {"k_adadelta", MOCK_READS_LR, 10, 5, 0},
    {"k_sgd", MOCK_READS_LR, 8, 4, 0},
    {"k_dropout", MOCK_READS_KEY, 8, 5, 0},
    {"k_flatten_dropout", MOCK_READS_KEY, 11, 8, 0},
    {"k_pool_flatten_dropout", MOCK_READS_KEY, 16, 13, 0},
    {"k_net_head", MOCK_READS_KEY, 1, 0, offsetof(nn_head, key)},
    {"k_cp_forward", MOCK_READS_KEY, 6, 5, offsetof(nn_flat_dropout, key)},
    {"k_cpt_forward", MOCK_READS_KEY, 6, 5, offsetof(nn_flat_dropout, key)},
};
enum { SCALAR_KERNELS = sizeof scalar_kernels / sizeof scalar_kernels[0], MAX_SCALAR_FUNS = 16 };
static struct {
    const void *fun;
    int entry;
} scalar_funs[MAX_SCALAR_FUNS];
static int nscalar_funs;

/* Every kernel's name without its C++ decoration (_Z, then the identifier's length and the identifier), for
 * mock_launch_report. */
enum { MAX_KERNELS = 1024, KERNEL_NAME = 64 };
static struct {
    const void *fun;
    char name[KERNEL_NAME];
} kernel_names[MAX_KERNELS];
static int nkernels;

static void register_name(const void *fun, const char *mangled)
{
    const char *p = mangled;
    if (strncmp(p, "_Z", 2) == 0) {
        p += 2 + (p[2] == 'L');
        char *end;
        long len = strtol(p, &end, 10);
        if (len > 0 && len < KERNEL_NAME && (long)strlen(end) >= len) {
            snprintf(kernel_names[nkernels].name, KERNEL_NAME, "%.*s", (int)len, end);
            p = NULL;
        }
    }
    if (p)
        snprintf(kernel_names[nkernels].name, KERNEL_NAME, "%s", mangled);
    kernel_names[nkernels++].fun = fun;
}

static const char *kernel_name(const void *fun)
{
    for (int i = 0; i < nkernels; i++)
        if (kernel_names[i].fun == fun)
            return kernel_names[i].name;
    return "?";
}

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *name, int limit,
                            uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
    (void)handle, (void)device_fun, (void)limit, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    if (nkernels < MAX_KERNELS)
        register_name(host_fun, name);
    if (strstr(name, "narrow_bf16"))
        narrow_fun = host_fun;
    if (strstr(name, "widen_bf16"))
        widen_fun = host_fun;
    if (strstr(name, "stamp_backward_end"))
        stamp_bwd_fun = host_fun;
    if (strstr(name, "stamp_exchange_end"))
        stamp_end_fun = host_fun;
    if (strstr(name, "comm_proxy"))
        proxy_fun = host_fun;
    if (strstr(name, "k_phase_stamp"))
        phase_stamp_fun = host_fun;
    if (strstr(name, "k_set_step_scalars"))
        set_scalars_fun = host_fun;
    if (strstr(name, "k_adadelta") || strstr(name, "k_sgd")) /* the optimizer: the end of a step's device work */
        optim_fun[optim_fun[0] != NULL] = host_fun;
    for (int e = 0; e < SCALAR_KERNELS && nkernels && nscalar_funs < MAX_SCALAR_FUNS; e++)
        if (kernel_names[nkernels - 1].fun == host_fun &&
            !strcmp(kernel_names[nkernels - 1].name, scalar_kernels[e].name))
            scalar_funs[nscalar_funs].fun = host_fun, scalar_funs[nscalar_funs++].entry = e;
}

/* A kernel's op: plain, or one reading the step's scalars with what its arguments say of them. */
static mock_op kernel_op(const void *fun, void **args)
{
    mock_op o = {.kind = OP_KERNEL};
    for (int i = 0; args && i < nscalar_funs; i++) /* (a test's stand-in kernel has no arguments) */
        if (scalar_funs[i].fun == fun) {
            const scalar_kernel *k = &scalar_kernels[scalar_funs[i].entry];
            o.reads = k->reads;
            o.scalars = *(const void **)args[k->scalars];
            memcpy(&o.by_value, (const char *)args[k->arg] + k->offset,
                   k->reads == MOCK_READS_LR ? sizeof(float) : sizeof(uint64_t));
        }
    return o;
}

/* __device__ variables (the reductions' counters: nothing runs them here). */
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *name, int ext, size_t size,
                       int constant, int global)
{
    (void)handle, (void)host_var, (void)device_address, (void)name, (void)ext, (void)size, (void)constant, (void)global;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st *stream)
{
    pushed.grid = grid;
    pushed.block = block;
    pushed.shared = shared;
    pushed.stream = stream;
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream)
{
    *grid = pushed.grid;
    *block = pushed.block;
    *shared = pushed.shared;
    *(cudaStream_t *)stream = pushed.stream;
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    *kernel = (cudaKernel_t)fun;
    return cudaSuccess;
}

/* k_set_step_scalars: its arguments written to the struct when it runs (a copy of a source the simulation holds).
 * Inside a capture the graph would freeze the values it exists to vary: a violation. */
static cudaError_t set_scalars(cudaStream_t stream, void **args)
{
    if (stream && stream->capture)
        mock_violate("the step's lr and dropout key written inside a graph capture");
    kern_scalars *v = malloc(sizeof *v);
    if (!v)
        abort();
    *v = (kern_scalars){.key = *(uint64_t *)args[2], .lr = *(float *)args[1]};
    cudaError_t r = mock_enqueue(
        stream, (mock_op){.kind = OP_MEMCPY, .dst = *(void **)args[0], .src = v, .bytes = sizeof *v, .staged = 1});
    if (r != cudaSuccess)
        free(v);
    return r;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                               cudaStream_t stream)
{
    (void)shared;
    cudaError_t r = mock_cuda_status("cudaLaunchKernel");
    if (r != cudaSuccess)
        return r;
    if (!stream)
        mock_violate("a kernel launched on the legacy default stream");
    if (!grid.x || !block.x || block.x > 1024)
        return cudaErrorInvalidConfiguration;
    mock_trace(TR_LAUNCH, kernel, (size_t)grid.x * grid.y * grid.z); /* the kernel and its blocks */
    if ((const void *)kernel == optim_fun[0] || (const void *)kernel == optim_fun[1])
        mock_trace(TR_OPTIM, NULL, 0);
    if ((const void *)kernel == narrow_fun || (const void *)kernel == widen_fun) /* (size_t n, in, out) */
        return mock_enqueue(stream, (mock_op){.kind = (const void *)kernel == narrow_fun ? OP_NARROW : OP_WIDEN,
                                              .count = *(size_t *)args[0],
                                              .src = *(const void **)args[1],
                                              .dst = *(void **)args[2]});
    if ((const void *)kernel == stamp_bwd_fun || (const void *)kernel == stamp_end_fun) /* (step_stamps *) */
        return mock_enqueue(
            stream,
            (mock_op){.kind = OP_STAMP, .value = (const void *)kernel == stamp_end_fun, .dst = *(void **)args[0]});
    if ((const void *)kernel == phase_stamp_fun) /* (phase_stamps *, int phase) */
        return mock_enqueue(stream,
                            (mock_op){.kind = OP_PHASE_STAMP, .dst = *(void **)args[0], .value = *(int *)args[1]});
    if ((const void *)kernel == set_scalars_fun) /* (kern_scalars *, float lr, uint64_t key) */
        return set_scalars(stream, args);
    if ((const void *)kernel == proxy_fun) /* (in, n, moved, sink, ns) */
        return mock_enqueue(stream, (mock_op){.kind = OP_PROXY,
                                              .src = *(const void **)args[0],
                                              .count = *(size_t *)args[1],
                                              .moved = *(size_t *)args[2],
                                              .dst = *(void **)args[3],
                                              .ns = *(unsigned long long *)args[4]});
    return mock_enqueue(stream, kernel_op(kernel, args));
}

/* ---- Trace ------------------------------------------------------------------------------------- */

typedef struct {
    int kind;
    const void *p;
    size_t bytes;
} trace_entry;

static trace_entry *trace;
static size_t ntrace, captrace;

void mock_trace(int kind, const void *p, size_t bytes)
{
    if (mock_graph_trace(kind, p, bytes))
        return; /* captured: traced when the graph is launched */
    if (kind == TR_LAUNCH)
        mock.launches++;
    else if (kind == TR_WAIT)
        mock.waits++;
    else if (kind == TR_ALLOC)
        mock.allocs++;
    if (ntrace == captrace) {
        captrace = captrace ? 2 * captrace : 4096;
        trace = realloc(trace, captrace * sizeof *trace);
        if (!trace)
            abort();
    }
    trace[ntrace++] = (trace_entry){kind, p, bytes};
}

/* How many trace entries of kind name p. */
static long traced(int kind, const void *p)
{
    long n = 0;
    for (size_t j = 0; j < ntrace; j++)
        n += trace[j].kind == kind && trace[j].p == p;
    return n;
}

/* Of the entries of kind whose address also appears as kind `also` (-1: any), the first of the address traced most
 * often as kind. NULL when none. */
static const trace_entry *most_traced(int kind, int also)
{
    const trace_entry *best = NULL;
    long best_n = 0;
    for (size_t i = 0; i < ntrace; i++) {
        if (trace[i].kind != kind || (also >= 0 && !traced(also, trace[i].p)))
            continue;
        long n = traced(kind, trace[i].p);
        if (n > best_n) {
            best = &trace[i];
            best_n = n;
        }
    }
    return best;
}

/* The gradient buffer: the memset region that starts where all-reduces start, cleared most often (at the
 * model's creation and where the collectives place it; the overlap reference's scratch buffer once). NULL when
 * none. */
static const trace_entry *gradient_memset(void) { return most_traced(TR_MEMSET, TR_ALLREDUCE); }

/* The batch's sample ids: the destination of most device-to-device copies (one per micro-batch, queued by the
 * host before the step's work; a step replayed as a graph has no other). NULL when none. */
static const void *ids_buffer(void)
{
    const trace_entry *t = most_traced(TR_COPY, -1);
    return t ? t->p : NULL;
}

/* Where a step starts: at the copy of its first micro-batch's ids, the first after the optimizer ended the step
 * before (the first ever, for step 1). The optimizer zeroes the gradients as it reads them, so no memset marks
 * a step. */
static int step_starts(const trace_entry *t, const void *ids, int *after_optim)
{
    if (t->kind == TR_OPTIM)
        *after_optim = 1;
    if (t->kind != TR_COPY || t->p != ids || !*after_optim)
        return 0;
    *after_optim = 0;
    return 1;
}

/* One line per optimizer step but the last (which runs into the end of the run), from its start (step_starts)
 * to the next step's, the host's work between steps included; "step 0" runs from the start of the run to the
 * first step. "last_bucket_first" is 1 when the step's last bucket (the one holding the gradients' first
 * element: buckets go back to front) was enqueued before the step's first host wait; "graphs" counts its CUDA
 * graph launches (a replayed step's kernels are not host launches), "copies" its device-to-device copies
 * queued by the host, "graph_copies" those its graphs replayed, "gemm_streams" how many streams its host-queued
 * GEMMs ran on. */
int mock_step_report(const char *path)
{
    const trace_entry *g = gradient_memset();
    const void *ids = ids_buffer();
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    long step = 0, count[TR_OPTIM + 1] = {0}, last_bucket = -1, first_wait = -1;
    unsigned gemm_streams = 0; /* a bit per stream */
    int after_optim = 1;
    for (size_t i = 0; g && ids && i < ntrace; i++) {
        const trace_entry *t = &trace[i];
        if (step_starts(t, ids, &after_optim)) {
            fprintf(f,
                    "step %ld launches %ld gemms %ld waits %ld allocs %ld buckets %ld last_bucket_first %d "
                    "graphs %ld copies %ld graph_copies %ld gemm_streams %d\n",
                    step, count[TR_LAUNCH], count[TR_GEMM], count[TR_WAIT], count[TR_ALLOC], count[TR_ALLREDUCE],
                    last_bucket >= 0 && (first_wait < 0 || last_bucket < first_wait), count[TR_GRAPH], count[TR_COPY],
                    count[TR_GRAPH_COPY], __builtin_popcount(gemm_streams));
            step++;
            gemm_streams = 0;
            for (int k = 0; k <= TR_OPTIM; k++)
                count[k] = 0;
            last_bucket = first_wait = -1;
        }
        int in_grads = (const char *)t->p >= (const char *)g->p && (const char *)t->p < (const char *)g->p + g->bytes;
        if (t->kind == TR_ALLREDUCE && !in_grads)
            continue; /* another collective (BatchNorm statistics) */
        count[t->kind]++;
        if (t->kind == TR_GEMM && t->bytes)
            gemm_streams |= 1u << (t->bytes - 1);
        if (t->kind == TR_ALLREDUCE && t->p == g->p)
            last_bucket = (long)i;
        if (t->kind == TR_WAIT && first_wait < 0)
            first_wait = (long)i;
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* One line per kernel and grid size launched by the host in the optimizer steps after the first (from the end of
 * step 1's optimizer to the end of the last's): "NAME BLOCKS LAUNCHES_PER_STEP". 0, or -1 (also without two
 * steps). Eager steps only: a replayed graph launches nothing. */
int mock_launch_report(const char *path)
{
    size_t first = ntrace, last = 0;
    long steps = -1;
    for (size_t i = 0; i < ntrace; i++)
        if (trace[i].kind == TR_OPTIM) {
            first = first < i ? first : i;
            last = i;
            steps++;
        }
    FILE *f = steps > 0 ? fopen(path, "w") : NULL;
    if (!f)
        return -1;
    for (size_t i = first; i < last; i++) {
        const trace_entry *t = &trace[i];
        int seen = 0;
        for (size_t j = first; j < i && !seen; j++)
            seen = trace[j].kind == TR_LAUNCH && trace[j].p == t->p && trace[j].bytes == t->bytes;
        if (t->kind != TR_LAUNCH || seen)
            continue;
        long n = 0;
        for (size_t j = i; j < last; j++)
            n += trace[j].kind == TR_LAUNCH && trace[j].p == t->p && trace[j].bytes == t->bytes;
        fprintf(f, "%s %zu %g\n", kernel_name(t->p), t->bytes, (double)n / (double)steps);
    }
    return fclose(f) == 0 ? 0 : -1;
}
