#include "nn/cpu/conv_onednn.h"

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cpu/conv_cpu.h"
#include "nn/cpu/onednn_arg.h"
#include "base/errors.h"
#include "nn/layers.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/cpu/nchw16c.h"
#include "nn/cpu/wino43.h"
#include "nn/cpu/wino43_pool.h"
#include "nn/cpu/conv1_direct.h"
#include "nn/cpu/wino43_stack.h"
#include "base/threads.h"

/* One convolution shape at one batch size: the three primitives and their arguments, each built on first use.
 * A run meets a handful of batch sizes (the training batch, the evaluation batch, their remainders); the
 * evaluation's never need the backward ones. The forward always adds a bias, zeros when the layer adds
 * its own later, so one plan serves both. */
typedef struct {
    int C, H, W, F, k, pad, wide, N, winograd; /* the key (winograd: asked for; alg: what oneDNN has) */
    dnnl_alg_kind_t alg;
    int own; /* wino43.h takes this shape on this CPU (WINO_OWN): the primitives are made for its nChw16c
              * layouts (oneDNN's reference ones where its own kernels want others: AVX2's nChw8c), and only
              * their reorders run */
    float *wino_U, *wino_Ub; /* wino43.h's weights when its forward, input gradient replace oneDNN's (WINO_OWN) */
    int wino_parts;          /* then the samples go in parts, one per thread, each with ... */
    float *wino_scratch;     /* ... one sample's blocked tensors (wino43_pool.h) ... */
    float *wino_ws;          /* ... and its sums of the weight gradient (wino43.h), where wino_Ub is set */
    dnnl_primitive_desc_t fwd_pd;
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    tensor_arg x, w, b, y;      /* forward */
    tensor_arg dy, wd, dx;      /* backward data */
    tensor_arg xw, dyw, dw, db; /* backward weights: dw, db to the plan's own dense sums */
    int dy_shared;              /* both backward passes take diff_dst in one layout: dy is unused, dyw serves */
    int x_shared;               /* backward weights takes src as the forward does: xw is unused, x serves */
    int y_pooled, dy_pooled;    /* y.prim, dyw.prim are nChw16c: nchw16c.h pools them in place of y */
    int dx_blocked;             /* dx.prim is nChw16c: nchw16c.h converts it, through a ReLU */
    const float *kept_x;        /* the last forward's input, converted in x.prim while kept_at == calls */
    unsigned long kept_at;
    float *dw_sum, *db_sum, *zero_bias;
    size_t arena_bytes; /* its args' prim buffers, laid end to end */
} conv_plan;

#define PLANS 16
static conv_plan plans[PLANS];
static int nplans, next_victim;
static unsigned long calls; /* convolutions run; each may reuse the arena */
/* The prim buffers live only during one call, so every plan's share one arena, as large as the largest
 * plan's: the evaluation batch's blocked copies do not add to the training batch's. */
static char *arena;
static size_t arena_size;

/* The user-side descriptors of a plan: x, y (rows of W in the wide layout), w [F][C][k][k], b [F]; the
 * primitives' own choices (any_*), and the geometry. */
typedef struct {
    dnnl_memory_desc_t x, y, w, b, any_x, any_y, any_w;
    dnnl_dims_t strides, pad;
} plan_mds;

static plan_mds plan_descs(const conv_plan *p)
{
    int OH = conv_out(p->H, p->k, p->pad), OW = conv_out(p->W, p->k, p->pad);
    dnnl_dims_t x = {p->N, p->C, p->H, p->W}, y = {p->N, p->F, OH, OW}, w = {p->F, p->C, p->k, p->k}, b = {p->F};
    dnnl_format_tag_t any = p->own ? dnnl_nChw16c : dnnl_format_tag_any;
    return (plan_mds){.x = onednn_cnhw_md(p->N, p->C, p->H, p->W, p->W),
                      .y = onednn_cnhw_md(p->N, p->F, OH, OW, conv_ld(p->W, p->k, p->pad, p->wide)),
                      .w = onednn_dense_md(4, w, dnnl_oihw),
                      .b = onednn_dense_md(1, b, dnnl_a),
                      .any_x = onednn_dense_md(4, x, any),
                      .any_y = onednn_dense_md(4, y, any),
                      .any_w = onednn_dense_md(4, w, dnnl_format_tag_any),
                      .strides = {1, 1},
                      .pad = {p->pad, p->pad}};
}

/* Whether the primitive takes or gives the tensor a of C channels of H x W in nchw16c.h's layout, converted
 * from or to the layer's: then nchw16c.h's kernels read or write it in place of the conversion. */
static int blocked_layout(const conv_plan *p, const tensor_arg *a, int C, int H, int W)
{
    if (!a->reorder || C % CHANNEL_BLOCK)
        return 0;
    dnnl_dims_t dims = {p->N, C, H, W};
    dnnl_memory_desc_t md = onednn_dense_md(4, dims, dnnl_nChw16c);
    const dnnl_memory_desc_t *prim;
    DNNL_CHECK(dnnl_memory_get_memory_desc(a->prim, &prim));
    return dnnl_memory_desc_equal(&md, prim);
}

/* The forward's descriptor with algorithm alg; 0 when oneDNN has no implementation of it here (Winograd
 * needs AVX-512 and a 3x3 kernel). */
static int forward_pd(dnnl_primitive_desc_t *pd, dnnl_alg_kind_t alg, const plan_mds *m)
{
    dnnl_convolution_desc_t d;
    DNNL_CHECK(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, alg, &m->any_x, &m->any_w, &m->b,
                                                  &m->any_y, m->strides, m->pad, m->pad));
    dnnl_status_t s = dnnl_primitive_desc_create(pd, &d, NULL, onednn_engine(), NULL);
    if (s == dnnl_unimplemented)
        return 0;
    DNNL_CHECK(s);
    return 1;
}

static void plan_forward(conv_plan *p, const plan_mds *m)
{
    p->alg = p->winograd && forward_pd(&p->fwd_pd, dnnl_convolution_winograd, m) ? dnnl_convolution_winograd
                                                                                 : dnnl_convolution_direct;
    if (p->alg == dnnl_convolution_direct && !forward_pd(&p->fwd_pd, p->alg, m))
        die(EX_SOFTWARE, "oneDNN has no direct convolution for %dx%d planes of %d channels", p->H, p->W, p->C);
    p->fwd = onednn_create(p->fwd_pd);
    onednn_arg_init(&p->arena_bytes, &p->x, &m->x, onednn_query(p->fwd_pd, dnnl_query_src_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->w, &m->w, onednn_query(p->fwd_pd, dnnl_query_weights_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->b, &m->b, onednn_query(p->fwd_pd, dnnl_query_weights_md, 1), 1);
    onednn_arg_init(&p->arena_bytes, &p->y, &m->y, onednn_query(p->fwd_pd, dnnl_query_dst_md, 0), 0);
    p->y_pooled = blocked_layout(p, &p->y, p->F, conv_out(p->H, p->k, p->pad), conv_out(p->W, p->k, p->pad));
    p->zero_bias = xcalloc((size_t)p->F, sizeof(float));
    if (p->own && p->y_pooled && blocked_layout(p, &p->x, p->C, p->H, p->W))
        p->wino_U = xmalloc_aligned(wino43_weights_size(p->C, p->F) * sizeof(float));
    if (p->wino_U) {
        p->wino_parts = omp_get_max_threads();
        p->wino_scratch =
            xmalloc_aligned(p->wino_parts * wino43_pool_scratch_size(p->C, p->H, p->W, p->F) * sizeof(float));
    }
}

static void plan_backward(conv_plan *p, const plan_mds *m)
{
    dnnl_convolution_desc_t d;
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_convolution_backward_weights_desc_init(&d, p->alg, &m->any_x, &m->any_w, &m->b, &m->any_y,
                                                           m->strides, m->pad, m->pad));
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &d, NULL, onednn_engine(), p->fwd_pd));
    p->bwd_weights = onednn_create(pd);
    /* src too: the forward's conversion serves the backward that follows it (layers.h: x NULL). */
    p->x_shared =
        dnnl_memory_desc_equal(onednn_query(p->fwd_pd, dnnl_query_src_md, 0), onednn_query(pd, dnnl_query_src_md, 0));
    if (!p->x_shared)
        onednn_arg_init(&p->arena_bytes, &p->xw, &m->x, onednn_query(pd, dnnl_query_src_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->dyw, &m->y, onednn_query(pd, dnnl_query_diff_dst_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->dw, &m->w, onednn_query(pd, dnnl_query_diff_weights_md, 0), 0);
    onednn_arg_init(&p->arena_bytes, &p->db, &m->b, onednn_query(pd, dnnl_query_diff_weights_md, 1), 0);
    dnnl_memory_desc_t dyw = *onednn_query(pd, dnnl_query_diff_dst_md, 0);
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));

    DNNL_CHECK(dnnl_convolution_backward_data_desc_init(&d, p->alg, &m->any_x, &m->any_w, &m->any_y, m->strides, m->pad,
                                                        m->pad));
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &d, NULL, onednn_engine(), p->fwd_pd));
    p->bwd_data = onednn_create(pd);
    /* diff_dst is one tensor for both passes: converted once when they want the same layout. */
    p->dy_shared = dnnl_memory_desc_equal(&dyw, onednn_query(pd, dnnl_query_diff_dst_md, 0));
    if (!p->dy_shared)
        onednn_arg_init(&p->arena_bytes, &p->dy, &m->y, onednn_query(pd, dnnl_query_diff_dst_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->wd, &m->w, onednn_query(pd, dnnl_query_weights_md, 0), 1);
    onednn_arg_init(&p->arena_bytes, &p->dx, &m->x, onednn_query(pd, dnnl_query_diff_src_md, 0), 0);
    p->dy_pooled =
        p->dy_shared && blocked_layout(p, &p->dyw, p->F, conv_out(p->H, p->k, p->pad), conv_out(p->W, p->k, p->pad));
    p->dx_blocked = blocked_layout(p, &p->dx, p->C, p->H, p->W);
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    if (p->wino_U && p->dy_pooled && p->dx_blocked)
        p->wino_Ub = xmalloc_aligned(wino43_weights_size(p->C, p->F) * sizeof(float));
    if (p->wino_Ub) /* x is in x.prim's blocks (plan_forward), dy in dyw.prim's */
        p->wino_ws = xmalloc_aligned(p->wino_parts * wino43_wgrad_part_size(p->C, p->F) * sizeof(float));
    p->dw_sum = xmalloc_aligned((size_t)p->F * p->C * p->k * p->k * sizeof(float));
    p->db_sum = xmalloc_aligned((size_t)p->F * sizeof(float));
}

/* Every tensor argument of a plan, for the loops over them. */
enum { PLAN_ARGS = 11 };
static void plan_args(conv_plan *p, tensor_arg *args[PLAN_ARGS])
{
    tensor_arg *all[PLAN_ARGS] = {&p->x, &p->w, &p->b, &p->y, &p->dy, &p->wd, &p->dx, &p->xw, &p->dyw, &p->dw, &p->db};
    memcpy(args, all, sizeof all);
}

static void plan_destroy(conv_plan *p)
{
    tensor_arg *args[PLAN_ARGS];
    plan_args(p, args);
    for (int i = 0; i < PLAN_ARGS; i++)
        onednn_arg_destroy(args[i]);
    dnnl_primitive_t prims[] = {p->fwd, p->bwd_data, p->bwd_weights};
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (prims[i])
            DNNL_CHECK(dnnl_primitive_destroy(prims[i]));
    DNNL_CHECK(dnnl_primitive_desc_destroy(p->fwd_pd));
    free(p->dw_sum);
    free(p->db_sum);
    free(p->zero_bias);
    free(p->wino_U);
    free(p->wino_Ub);
    free(p->wino_ws);
    free(p->wino_scratch);
    memset(p, 0, sizeof *p);
}

/* Points the plan's prim buffers into the arena, grown to its size first. */
static void bind_arena(conv_plan *p)
{
    if (arena_size < p->arena_bytes) {
        free(arena);
        arena = xmalloc_aligned(p->arena_bytes);
        arena_size = p->arena_bytes;
        calls++; /* a kept input is gone */
    }
    tensor_arg *args[PLAN_ARGS];
    plan_args(p, args);
    for (int i = 0; i < PLAN_ARGS; i++)
        if (args[i]->reorder)
            DNNL_CHECK(dnnl_memory_set_data_handle(args[i]->prim, arena + args[i]->offset));
}

/* The plan for this shape and batch size with its forward (and its backward too when `backward`) built;
 * when the table is full the plans are recycled in turn. */
static conv_plan *plan_for(int N, int C, int H, int W, int F, int k, int pad, int wide, int winograd, int backward)
{
    conv_plan key = {.C = C, .H = H, .W = W, .F = F, .k = k, .pad = pad, .wide = wide, .N = N, .winograd = winograd};
    conv_plan *p = NULL;
    for (int i = 0; i < nplans && !p; i++)
        if (memcmp(&plans[i], &key, offsetof(conv_plan, alg)) == 0)
            p = &plans[i];
    if (!p) {
        p = nplans < PLANS ? &plans[nplans++] : &plans[next_victim++ % PLANS];
        if (p->fwd)
            plan_destroy(p);
        *p = key;
        p->own =
            winograd == WINO_OWN && wino43_usable(C, F, H, W, k, pad) && wino43_backward_usable(C, F, H, W, k, pad);
        plan_mds m = plan_descs(p);
        plan_forward(p, &m);
    }
    if (backward && !p->bwd_weights) {
        plan_mds m = plan_descs(p);
        plan_backward(p, &m);
    }
    bind_arena(p);
    return p;
}

/* One input channel is left to im2col + GEMM: there oneDNN's convolution with its reorders is slower (net's
 * conv1; docs/performance.md). */
static int onednn_takes(int C) { return C > 1; }

/* wino43.h's forward from x, converted to the blocks in x.prim, to y.prim (both nChw16c: see plan_forward). */
static void wino43_run(conv_plan *p, const float *x, const float *w, const float *b)
{
    onednn_arg_in(&p->x, x);
    DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
    wino43_weights(w, p->F, p->C, p->wino_U);
    wino43_forward((const float *)(arena + p->x.offset), p->wino_U, b, (float *)(arena + p->y.offset), p->N, p->C, p->H,
                   p->W, p->F);
}

/* The forward into y.prim, converted to the layer's y unless y is NULL (the caller reads y.prim). */
static void forward_run(conv_plan *p, const float *x, const float *w, const float *b, float *y)
{
    dnnl_memory_t dst = y ? onednn_arg_out(&p->y, y) : p->y.prim;
    if (p->wino_U) {
        wino43_run(p, x, w, b);
    } else {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, onednn_arg_in(&p->x, x)},
                                  {DNNL_ARG_WEIGHTS, onednn_arg_in(&p->w, w)},
                                  {DNNL_ARG_BIAS, onednn_arg_in(&p->b, b ? b : p->zero_bias)},
                                  {DNNL_ARG_DST, dst}};
        onednn_run(p->fwd, 4, args);
    }
    if (y)
        onednn_arg_done(&p->y);
    DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
    p->kept_x = x;
    p->kept_at = ++calls;
}

/* The weight and bias gradients into the plan's sums, from src and dy (NULL: in dyw.prim). */
static void onednn_weights_run(conv_plan *p, dnnl_memory_t src, const float *dy)
{
    dnnl_exec_arg_t wargs[] = {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_DIFF_DST, dy ? onednn_arg_in(&p->dyw, dy) : p->dyw.prim},
                               {DNNL_ARG_DIFF_WEIGHTS, onednn_arg_out(&p->dw, p->dw_sum)},
                               {DNNL_ARG_DIFF_BIAS, onednn_arg_out(&p->db, p->db_sum)}};
    onednn_run(p->bwd_weights, 4, wargs);
    onednn_arg_done(&p->dw);
    onednn_arg_done(&p->db);
    DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
}

/* wino43.h's instead, from x converted to x.prim's blocks (NULL: there already) and dy to dyw.prim's. */
static void wino43_weights_run(conv_plan *p, const float *x, const float *dy)
{
    if (x)
        onednn_arg_in(&p->x, x);
    if (dy)
        onednn_arg_in(&p->dyw, dy);
    DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
    wino43_backward_weights((const float *)(arena + p->x.offset), (const float *)(arena + p->dyw.offset), p->dw_sum,
                            p->db_sum, p->wino_ws, p->wino_parts, p->N, p->C, p->H, p->W, p->F);
}

/* oneDNN writes its weight and bias gradients; the layer's contract adds them (layers.h). */
static void add_sums(const conv_plan *p, float *dw, float *db)
{
    cpu_add_grads(dw, db, p->dw_sum, p->db_sum, (size_t)p->F * p->C * p->k * p->k, p->F);
}

/* Both backward passes from diff_dst dy (NULL: written in dyw.prim already, which then serves both). dx goes
 * through the ReLU whose output x is, unless x_relu is NULL (layers.h's pool_conv_backward).
 * dw and db accumulate (layers.h: backward ADDS parameter gradients); oneDNN's overwrite the plan's sums. */
static void backward_run(conv_plan *p, const float *x, const float *x_relu, const float *w, const float *dy, float *dw,
                         float *db, float *dx)
{
    /* x NULL: the forward's input, still converted when no convolution ran since (none has used the arena). */
    int kept = !x && (p->x_shared || p->wino_ws) && p->kept_at == calls++;
    if (p->wino_ws)
        wino43_weights_run(p, kept ? NULL : x ? x : p->kept_x, dy);
    else
        onednn_weights_run(p, kept ? p->x.prim : onednn_arg_in(p->x_shared ? &p->x : &p->xw, x ? x : p->kept_x), dy);
    add_sums(p, dw, db);
    if (!dx)
        return;
    dnnl_memory_t dsrc = onednn_arg_out(&p->dx, dx);
    if (p->wino_Ub) { /* dy is in dyw.prim's blocks (plan_backward: dy_pooled) */
        wino43_weights_backward(w, p->F, p->C, p->wino_Ub);
        wino43_backward_data((const float *)(arena + p->dyw.offset), p->wino_Ub, (float *)(arena + p->dx.offset), p->N,
                             p->C, p->H, p->W, p->F);
    } else {
        dnnl_memory_t ddst = p->dy_shared ? p->dyw.prim : onednn_arg_in(&p->dy, dy);
        dnnl_exec_arg_t dargs[] = {
            {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, onednn_arg_in(&p->wd, w)}, {DNNL_ARG_DIFF_SRC, dsrc}};
        onednn_run(p->bwd_data, 3, dargs);
    }
    if (x_relu && p->dx_blocked) {
        DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
        nchw16c_relu_backward((const float *)(arena + p->dx.offset), x_relu, dx, p->C, p->N, p->H * p->W);
        return;
    }
    onednn_arg_done(&p->dx);
    DNNL_CHECK(dnnl_stream_wait(onednn_stream()));
    if (x_relu)
        cpu_relu_backward(dx, x_relu, (size_t)p->C * p->N * p->H * p->W);
}

static int onednn_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C,
                          int H, int W, int F, int k, int pad, int wide, int winograd)
{
    if (!onednn_takes(C))
        return cpu_conv_forward(be, x, w, b, y, N, C, H, W, F, k, pad, wide);
    forward_run(plan_for(N, C, H, W, F, k, pad, wide, winograd, 0), x, w, b, y);
    return 1;
}

static int onednn_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                           float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide, int winograd)
{
    /* conv1 (x NULL: its forward kept im2col's columns instead, layers.h) */
    if (winograd == WINO_OWN && C == 1 && x && !dx && !wide && conv1_direct_usable(H, W, F, k, pad)) {
        conv1_direct_backward(x, dy, dw, db, omp_get_max_threads(), N, H, W, F);
        return 1;
    }
    if (!onednn_takes(C))
        return cpu_conv_backward(be, x, w, dy, dw, db, dx, N, C, H, W, F, k, pad, wide);
    backward_run(plan_for(N, C, H, W, F, k, pad, wide, winograd, 1), x, NULL, w, dy, dw, db, dx);
    return 1;
}

/* wino43_pool.h's view of the plan. */
static wino43_batch wino_batch(const conv_plan *p)
{
    return (wino43_batch){p->N,          p->C,
                          p->H,          p->W,
                          p->F,          conv_ld(p->W, p->k, p->pad, p->wide),
                          p->wino_parts, p->wino_scratch,
                          p->wino_ws,    p->wino_U,
                          p->wino_Ub};
}

/* wino43_pool.h's forward, which reads x itself: x.prim holds no converted x, so a backward converts it again. */
static void wino43_pool_run(conv_plan *p, const float *x, const float *w, const float *pb, float *py, int32_t *arg)
{
    wino43_batch b = wino_batch(p);
    wino43_pool_forward(&b, x, w, pb, py, arg);
    p->kept_x = x;
    p->kept_at = 0;
    calls++;
}

static int onednn_conv_pool_forward(const float *x, const float *w, const float *pb, float *py, int32_t *arg,
                                    const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad,
                                    int wide, int winograd)
{
    if (fd || !onednn_takes(C)) /* dropout1 stays the composition's */
        return 0;
    conv_plan *p = plan_for(N, C, H, W, F, k, pad, wide, winograd, 0);
    if (!p->y_pooled)
        return 0;
    if (p->wino_U) {
        wino43_pool_run(p, x, w, pb, py, arg);
        return 1;
    }
    forward_run(p, x, w, NULL, NULL);
    nchw16c_maxpool2_relu_forward((const float *)(arena + p->y.offset), pb, py, arg, F, N, conv_out(H, k, pad),
                                  conv_out(W, k, pad), conv_ld(W, k, pad, wide));
    return 1;
}

static int onednn_pool_conv_backward(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg,
                                     const float *x, const float *x_relu, const float *w, float *dw, float *db,
                                     float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide,
                                     int winograd)
{
    if (fd || !onednn_takes(C))
        return 0;
    conv_plan *p = plan_for(N, C, H, W, F, k, pad, wide, winograd, 1);
    if (!p->dy_pooled)
        return 0;
    if (p->wino_ws && dx && x_relu) {
        wino43_batch b = wino_batch(p);
        wino43_pool_backward(&b, dpy, py, arg, x ? x : p->kept_x, x_relu, w, p->dw_sum, p->db_sum, dx);
        add_sums(p, dw, db);
        return 1;
    }
    nchw16c_relu_maxpool2_backward(dpy, py, arg, (float *)(arena + p->dyw.offset), F, N, conv_out(H, k, pad),
                                   conv_out(W, k, pad), conv_ld(W, k, pad, wide));
    backward_run(p, x, x_relu, w, NULL, dw, db, dx);
    return 1;
}

/* The backend's entries for one algorithm: the calls above with winograd bound. */
#define ALGORITHM_ENTRIES(alg, winograd)                                                                             \
    static int alg##_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N,  \
                             int C, int H, int W, int F, int k, int pad, int wide)                                   \
    {                                                                                                                \
        return onednn_forward(be, x, w, b, y, N, C, H, W, F, k, pad, wide, winograd);                                \
    }                                                                                                                \
    static int alg##_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw,      \
                              float *db, float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide)     \
    {                                                                                                                \
        return onednn_backward(be, x, w, dy, dw, db, dx, N, C, H, W, F, k, pad, wide, winograd);                     \
    }                                                                                                                \
    static int alg##_conv_pool_forward(const float *x, const float *w, const float *pb, float *py, int32_t *arg,     \
                                       const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad, \
                                       int wide)                                                                     \
    {                                                                                                                \
        return onednn_conv_pool_forward(x, w, pb, py, arg, fd, N, C, H, W, F, k, pad, wide, winograd);               \
    }                                                                                                                \
    static int alg##_pool_conv_backward(float *dpy, const nn_flat_dropout *fd, const float *py, const int32_t *arg,  \
                                        const float *x, const float *x_relu, const float *w, float *dw, float *db,   \
                                        float *dx, int N, int C, int H, int W, int F, int k, int pad, int wide)      \
    {                                                                                                                \
        return onednn_pool_conv_backward(dpy, fd, py, arg, x, x_relu, w, dw, db, dx, N, C, H, W, F, k, pad, wide,    \
                                         winograd);                                                                  \
    }

ALGORITHM_ENTRIES(direct, WINO_NONE)
ALGORITHM_ENTRIES(winograd, WINO_ONEDNN)
ALGORITHM_ENTRIES(own_wino, WINO_OWN)

const char *onednn_version(void)
{
    static char v[32];
    const dnnl_version_t *d = dnnl_version();
    snprintf(v, sizeof v, "%d.%d.%d", d->major, d->minor, d->patch);
    return v;
}

int onednn_has_winograd(void)
{
    conv_plan probe = {.C = 16, .H = 8, .W = 8, .F = 16, .k = 3, .N = 1};
    plan_mds m = plan_descs(&probe);
    dnnl_primitive_desc_t pd;
    if (!forward_pd(&pd, dnnl_convolution_winograd, &m))
        return 0;
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    return 1;
}

#define SET_ENTRIES(b, alg)                                 \
    do {                                                    \
        (b)->conv_forward = alg##_forward;                  \
        (b)->conv_backward = alg##_backward;                \
        (b)->conv_pool_forward = alg##_conv_pool_forward;   \
        (b)->pool_conv_backward = alg##_pool_conv_backward; \
    } while (0)

const nn_backend *nn_cpu_onednn(int winograd)
{
    static nn_backend be[WINO_OWN + 1];
    nn_backend *b = &be[winograd];
    if (!b->name) {
        *b = nn_cpu;
        if (winograd == WINO_OWN) {
            SET_ENTRIES(b, own_wino);
            b->conv1_bias_relu_forward = conv1_direct_bias_relu; /* its backward: onednn_backward */
            b->conv_stack_forward = wino43_stack_forward;
            b->conv_stack_backward = wino43_stack_backward;
        } else if (winograd)
            SET_ENTRIES(b, winograd);
        else
            SET_ENTRIES(b, direct);
    }
    return b;
}
