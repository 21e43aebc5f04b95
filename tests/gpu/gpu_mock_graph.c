/* Simulated CUDA graphs (stream capture) for gpu_mock.h.
 * - cudaStreamBeginCapture: what is queued on the capturing stream, and on every stream that joins it by
 *   waiting on an event recorded in the capture, is recorded in the graph instead of being queued; nothing
 *   runs. Kernel launches, GEMMs and collectives captured are not counted as host work (mock.launches), and
 *   the memsets and all-reduces traced while capturing are kept with the graph.
 * - A host wait for device work (synchronise, event query or wait, blocking copy, cudaMalloc in a mode
 *   other than relaxed) while a capture is open is illegal, as in CUDA: it fails with
 *   cudaErrorStreamCaptureUnsupported and invalidates the capture (EndCapture then fails with
 *   cudaErrorStreamCaptureInvalidated and returns no graph); stricter than CUDA, which allows some
 *   waits in relaxed mode, because the trainer must not wait in a step at all. So does waiting in a
 *   capture on an event recorded outside it (cudaErrorStreamCaptureIsolation). A stream that joined and
 *   did not rejoin the origin makes EndCapture fail with cudaErrorStreamCaptureUnjoined.
 * - cudaGraphLaunch replays the recorded operations in their order on their streams (the origin's on the
 *   launch stream), after the launch stream's earlier work, with the captured event edges between
 *   streams: the scheduler and the race detector see every replayed operation. The launch itself counts
 *   once in mock.graph_launches and is traced (TR_GRAPH), and the graph's traced memsets and all-reduces
 *   are traced again, so the per-step report still cuts steps and counts buckets (its device-to-device
 *   copies as TR_GRAPH_COPY: a copy in a graph has a frozen source). */
#include "gpu_mock.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int kind;
    const void *p;
    size_t bytes;
} graph_trace;

typedef struct {
    mock_op op;
    struct CUstream_st *on; /* where it was captured */
    long rec;               /* OP_WAIT: the node of the record it waits for */
} graph_node;

struct CUgraph_st {
    struct CUstream_st *origin;
    int capturing, invalid;
    enum cudaStreamCaptureMode mode;
    graph_node *node;
    long n, cap;
    graph_trace *tr;
    long ntr, captr;
};

struct CUgraphExec_st {
    struct CUgraph_st *g;     /* a copy: the graph may be destroyed once instantiated */
    long *pos;                /* where each replayed record landed on its stream */
    long (*vc)[MOCK_STREAMS]; /* and what happened before it */
};

/* The event of replayed records (their edges are positions, kept by the launch): it never completes. */
static struct CUevent_st replay_event = {.gen = -1};

static void *grow(void *p, long *cap, long n, size_t size)
{
    if (n < *cap)
        return p;
    *cap = *cap ? 2 * *cap : 64;
    p = realloc(p, (size_t)*cap * size);
    if (!p)
        abort();
    return p;
}

static long add(struct CUgraph_st *g, struct CUstream_st *s, mock_op o, long rec)
{
    g->node = grow(g->node, &g->cap, g->n, sizeof *g->node);
    g->node[g->n] = (graph_node){o, s, rec};
    return g->n++;
}

cudaError_t mock_graph_add(struct CUstream_st *s, mock_op o)
{
    add(s->capture, s, o, -1);
    return cudaSuccess;
}

int mock_graph_trace(int kind, const void *p, size_t bytes)
{
    struct CUgraph_st *g = mock.capture;
    if (!g)
        return 0;
    if (kind == TR_MEMSET || kind == TR_ALLREDUCE || kind == TR_COPY || kind == TR_OPTIM) {
        g->tr = grow(g->tr, &g->captr, g->ntr, sizeof *g->tr);
        g->tr[g->ntr++] = (graph_trace){kind, p, bytes};
    }
    return 1;
}

cudaError_t mock_capture_refuse(const char *call, int alloc)
{
    struct CUgraph_st *g = mock.capture;
    if (!g || (alloc && g->mode == cudaStreamCaptureModeRelaxed))
        return cudaSuccess;
    (void)call;
    g->invalid = 1;
    return cudaErrorStreamCaptureUnsupported;
}

cudaError_t mock_graph_record(struct CUevent_st *e, struct CUstream_st *s)
{
    e->capture = s->capture;
    e->cap_idx = add(s->capture, s, (mock_op){.kind = OP_RECORD}, -1);
    return cudaSuccess;
}

cudaError_t mock_graph_wait(struct CUstream_st *s, struct CUevent_st *e)
{
    struct CUgraph_st *g = e->capture && e->capture == mock.capture ? mock.capture : NULL;
    if (!g) { /* a capturing stream waits on an event recorded outside the capture */
        s->capture->invalid = 1;
        return cudaErrorStreamCaptureIsolation;
    }
    s->capture = g; /* joins the capture, if it had not */
    add(g, s, (mock_op){.kind = OP_WAIT}, e->cap_idx);
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    cudaError_t r = mock_cuda_status("cudaStreamBeginCapture");
    if (r != cudaSuccess)
        return r;
    if (!s) {
        mock_violate("capture on the legacy default stream");
        return cudaErrorStreamCaptureUnsupported;
    }
    if (mock.capture)
        return cudaErrorStreamCaptureMerge; /* one capture at a time in the simulation */
    struct CUgraph_st *g = calloc(1, sizeof *g);
    g->origin = s;
    g->capturing = 1;
    g->mode = mode;
    s->capture = mock.capture = g;
    return cudaSuccess;
}

/* A joined stream has rejoined when the origin waited on a record made on it after its last operation. */
static int rejoined(const struct CUgraph_st *g, const struct CUstream_st *s)
{
    long last = -1;
    for (long i = 0; i < g->n; i++)
        if (g->node[i].on == s)
            last = i;
    if (last < 0 || s == g->origin)
        return 1;
    for (long i = last + 1; i < g->n; i++)
        if (g->node[i].on == g->origin && g->node[i].op.kind == OP_WAIT && g->node[i].rec == last &&
            g->node[last].op.kind == OP_RECORD)
            return 1;
    return 0;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    struct CUgraph_st *g = s ? s->capture : NULL;
    *graph = NULL;
    if (!g || g->origin != s)
        return cudaErrorIllegalState;
    int unjoined = 0;
    for (int i = 0; i < mock.nstreams; i++)
        if (mock.streams[i]->capture == g) {
            unjoined |= !rejoined(g, mock.streams[i]);
            mock.streams[i]->capture = NULL;
        }
    g->capturing = 0;
    mock.capture = NULL;
    cudaError_t r = g->invalid ? cudaErrorStreamCaptureInvalidated
                    : unjoined ? cudaErrorStreamCaptureUnjoined
                               : mock_cuda_status("cudaStreamEndCapture");
    if (r != cudaSuccess)
        return cudaGraphDestroy(g), r;
    *graph = g;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    *status = !s || !s->capture     ? cudaStreamCaptureStatusNone
              : s->capture->invalid ? cudaStreamCaptureStatusInvalidated
                                    : cudaStreamCaptureStatusActive;
    return mock_cuda_status("cudaStreamIsCapturing");
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags)
{
    mock.graph_flags_seen = flags;
    *exec = NULL;
    cudaError_t r = mock_cuda_status("cudaGraphInstantiate");
    if (r != cudaSuccess)
        return r;
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    x->g = malloc(sizeof *x->g);
    *x->g = *g;
    x->g->node = malloc((size_t)(g->n + 1) * sizeof *g->node);
    memcpy(x->g->node, g->node, (size_t)g->n * sizeof *g->node);
    x->g->tr = malloc((size_t)(g->ntr + 1) * sizeof *g->tr);
    memcpy(x->g->tr, g->tr, (size_t)g->ntr * sizeof *g->tr);
    x->pos = calloc((size_t)g->n + 1, sizeof *x->pos);
    x->vc = calloc((size_t)g->n + 1, sizeof *x->vc);
    *exec = x;
    return cudaSuccess;
}

/* A wait of s for position pos of stream on, after joining what the record had seen (vc). */
static void replay_wait(struct CUstream_st *s, struct CUstream_st *on, long pos, const long *vc)
{
    for (int t = 0; t < MOCK_STREAMS; t++)
        if (vc[t] > s->vc[t])
            s->vc[t] = vc[t];
    mock_enqueue(s, (mock_op){.kind = OP_WAIT, .wait_stream = on, .wait_pos = pos});
}

/* The origin's operations replay on the launch stream, the others on the stream they were captured on. */
static struct CUstream_st *on_launch(const struct CUgraph_st *g, struct CUstream_st *s, struct CUstream_st *launch)
{
    return s == g->origin ? launch : s;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t stream)
{
    cudaError_t r = mock_cuda_status("cudaGraphLaunch");
    if (r != cudaSuccess)
        return r;
    if (!stream)
        mock_violate("a graph launched on the legacy default stream");
    struct CUgraph_st *g = x->g;
    mock.graph_launches++;
    /* A joined stream's first node is the wait through which it joined: it starts after the origin's. */
    for (long i = 0; i < g->n; i++) {
        struct CUstream_st *s = on_launch(g, g->node[i].on, stream);
        mock_op o = g->node[i].op;
        long rec = g->node[i].rec;
        if (o.kind == OP_RECORD) {
            o.ev = &replay_event;
            mock_enqueue(s, o);
            x->pos[i] = s->n;
            memcpy(x->vc[i], s->vc, sizeof x->vc[i]);
        } else if (o.kind == OP_WAIT) {
            replay_wait(s, on_launch(g, g->node[rec].on, stream), x->pos[rec], x->vc[rec]);
        } else {
            mock_enqueue(s, o);
        }
    }
    for (long i = 0; i < g->ntr; i++)
        mock_trace(g->tr[i].kind == TR_COPY ? TR_GRAPH_COPY : g->tr[i].kind, g->tr[i].p, g->tr[i].bytes);
    mock_trace(TR_GRAPH, NULL, 0);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    if (x) {
        cudaGraphDestroy(x->g);
        free(x->pos);
        free(x->vc);
        free(x);
    }
    return mock_cuda_status("cudaGraphExecDestroy");
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    if (g) {
        memset(g->node, 0xff, (size_t)g->n * sizeof *g->node); /* a use after destruction reads garbage */
        free(g->node);
        free(g->tr);
        free(g);
    }
    return cudaSuccess;
}
