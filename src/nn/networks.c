/* The two networks: their state_dict tables (names, shapes, init), activations and passes, and their
 * recipes. Every size derives from the enums below. */
#include "nn/model_parts.h"

#include <string.h>

#include "base/profile.h"
#include "nn/layers.h"
#include "nn/ops.h"

/* state_dict entries of a layer, PyTorch's shapes and default init: a convolution's or linear layer's
 * weight and bias draw with fan_in = inputs per output; BatchNorm starts at weight 1, bias 0, running
 * mean 0, var 1. (Not formatted: clang-format takes these initialisers apart.) */
/* clang-format off */
#define CONV_PARAMS(L, name, F, C, k) \
    [WEIGHT(L)] = {name ".weight", 4, {F, C, k, k}, (C) * (k) * (k), 0}, {name ".bias", 1, {F}, (C) * (k) * (k), 0}
#define LINEAR_PARAMS(L, name, out, in) \
    [WEIGHT(L)] = {name ".weight", 2, {out, in}, in, 0}, {name ".bias", 1, {out}, in, 0}
#define BN_PARAMS(L, name, C) \
    [WEIGHT(L)] = {name ".weight", 1, {C}, 0, 1}, {name ".bias", 1, {C}, 0, 0}
#define BN_BUFFERS(S, name, C) \
    [STATS(S)] = {name ".running_mean", 1, {C}, 0, 0}, {name ".running_var", 1, {C}, 0, 1}, \
    {name ".num_batches_tracked", 0, {0}, 0, 0}
/* clang-format on */

/* net: every size derives from these. Sides S of square planes, P their areas (conv2's in wide rows). */
enum {
    NET_K = 3,
    NET_C1 = 32,
    NET_C2 = 64,
    NET_HIDDEN = 128,
    NET_S1 = CONV_OUT(IN_SIDE, NET_K, 0), /* conv1's output */
    NET_S2 = CONV_OUT(NET_S1, NET_K, 0),  /* conv2's output, in rows of NET_S1 */
    NET_SP = NET_S2 / 2,                  /* after the pool */
    NET_P1 = NET_S1 * NET_S1,
    NET_P2 = NET_S2 * NET_S1,
    NET_PP = NET_SP * NET_SP,
    NET_FLAT = NET_C2 * NET_PP, /* fc1's inputs */
};
enum { NET_CONV1, NET_CONV2, NET_FC1, NET_FC2, NET_LAYERS };

static const tensor_spec net_params[LAYER_TENSORS * NET_LAYERS] = {
    CONV_PARAMS(NET_CONV1, "conv1", NET_C1, IN_C, NET_K),
    CONV_PARAMS(NET_CONV2, "conv2", NET_C2, NET_C1, NET_K),
    LINEAR_PARAMS(NET_FC1, "fc1", NET_HIDDEN, NET_FLAT),
    LINEAR_PARAMS(NET_FC2, "fc2", CLASSES, NET_HIDDEN),
};
static const conv_shape net_conv1 = {.C = IN_C, .H = IN_SIDE, .W = IN_SIDE, .F = NET_C1, .k = NET_K},
                        net_conv2 = {.C = NET_C1, .H = NET_S1, .W = NET_S1, .F = NET_C2, .k = NET_K, .wide = 1};

/* convnet: every size derives from these. */
enum {
    CNN_K = 5,
    CNN_PAD = 2,
    CNN_C1 = 16,
    CNN_C2 = 32,
    CNN_S1 = CONV_OUT(IN_SIDE, CNN_K, CNN_PAD), /* conv1's output */
    CNN_SP1 = CNN_S1 / 2,                       /* after pool 1 */
    CNN_S2 = CONV_OUT(CNN_SP1, CNN_K, CNN_PAD), /* conv2's output */
    CNN_SP2 = CNN_S2 / 2,                       /* after pool 2 */
    CNN_P1 = CNN_S1 * CNN_S1,
    CNN_PP1 = CNN_SP1 * CNN_SP1,
    CNN_P2 = CNN_S2 * CNN_S2,
    CNN_PP2 = CNN_SP2 * CNN_SP2,
    CNN_FLAT = CNN_C2 * CNN_PP2, /* fc's inputs */
};
enum { CNN_CONV1, CNN_BN1, CNN_CONV2, CNN_BN2, CNN_FC, CNN_LAYERS };
enum { CNN_STATS1, CNN_STATS2, CNN_STATS };

static const tensor_spec convnet_params[LAYER_TENSORS * CNN_LAYERS] = {
    CONV_PARAMS(CNN_CONV1, "layer1.0", CNN_C1, IN_C, CNN_K),
    BN_PARAMS(CNN_BN1, "layer1.1", CNN_C1),
    CONV_PARAMS(CNN_CONV2, "layer2.0", CNN_C2, CNN_C1, CNN_K),
    BN_PARAMS(CNN_BN2, "layer2.1", CNN_C2),
    LINEAR_PARAMS(CNN_FC, "fc", CLASSES, CNN_FLAT),
};
static const tensor_spec convnet_buffers[STATS_TENSORS * CNN_STATS] = {
    BN_BUFFERS(CNN_STATS1, "layer1.1", CNN_C1),
    BN_BUFFERS(CNN_STATS2, "layer2.1", CNN_C2),
};
static const conv_shape
    convnet_conv1 = {.C = IN_C, .H = IN_SIDE, .W = IN_SIDE, .F = CNN_C1, .k = CNN_K, .pad = CNN_PAD},
    convnet_conv2 = {.C = CNN_C1, .H = CNN_SP1, .W = CNN_SP1, .F = CNN_C2, .k = CNN_K, .pad = CNN_PAD};

/* Whether the backend's conv_pool_forward / pool_conv_backward take every call of s (backend.h): then it has
 * no output scratch and no column buffer. */
static int conv_pool_covered(const model *m, const conv_shape *s)
{
    const nn_backend *be = m->be;
    return be->conv_pool_covers && be->conv_pool_covers(m->capacity, s->C, s->H, s->W, s->F, s->k, s->pad, s->wide);
}

/* im2col scratch for the larger of a network's two convolutions (s2 NULL: the first's alone). */
static float *col_scratch(model *m, const conv_shape *s1, const conv_shape *s2)
{
    size_t a = conv_scratch(s1->C, s1->H, s1->W, s1->k, s1->pad, m->chunk, s1->wide),
           b = s2 ? conv_scratch(s2->C, s2->H, s2->W, s2->k, s2->pad, m->chunk, s2->wide) : 0;
    return model_floats(m, a > b ? a : b);
}

static void net_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    net_acts *a = &m->a.net;
    a->h1 = model_floats(m, NET_C1 * N * NET_P1);
    int covered = conv_pool_covered(m, &net_conv2);
    a->a2 = covered ? NULL : model_floats(m, NET_C2 * N * NET_P2); /* wide */
    a->p2 = model_floats(m, NET_C2 * N * NET_PP);
    a->arg2 = model_mem(m, NET_C2 * N * NET_PP * sizeof(int32_t));
    a->f = model_floats(m, N * NET_FLAT);
    a->mask1 = model_floats(m, N * NET_FLAT);
    a->h3 = model_floats(m, N * NET_HIDDEN);
    a->mask2 = model_floats(m, N * NET_HIDDEN);
    a->dh3 = model_floats(m, N * NET_HIDDEN);
    a->df = model_floats(m, N * NET_FLAT);
    a->dp = model_floats(m, NET_C2 * N * NET_PP);
    a->dh1 = model_floats(m, NET_C1 * N * NET_P1);
    m->col = col_scratch(m, &net_conv1, covered ? NULL : &net_conv2);
}

static void convnet_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    convnet_acts *a = &m->a.cnn;
    a->a1 = model_floats(m, CNN_C1 * N * CNN_P1);
    a->b1 = model_floats(m, CNN_C1 * N * CNN_P1);
    a->p1 = model_floats(m, CNN_C1 * N * CNN_PP1);
    a->arg1 = model_mem(m, CNN_C1 * N * CNN_PP1 * sizeof(int32_t));
    a->a2 = model_floats(m, CNN_C2 * N * CNN_P2);
    a->b2 = model_floats(m, CNN_C2 * N * CNN_P2);
    a->p2 = model_floats(m, CNN_C2 * N * CNN_PP2);
    a->arg2 = model_mem(m, CNN_C2 * N * CNN_PP2 * sizeof(int32_t));
    a->f = model_floats(m, N * CNN_FLAT);
    a->df = model_floats(m, N * CNN_FLAT);
    a->dp2 = model_floats(m, CNN_C2 * N * CNN_PP2);
    a->dp1 = model_floats(m, CNN_C1 * N * CNN_PP1);
    a->mean1 = model_floats(m, CNN_C1);
    a->invstd1 = model_floats(m, CNN_C1);
    a->mean2 = model_floats(m, CNN_C2);
    a->invstd2 = model_floats(m, CNN_C2);
    m->col = col_scratch(m, &convnet_conv1, &convnet_conv2);
}

/* The layers on the model's backend and scratch; each backward releases its layer's gradients.
 * The last convolution of forward is the first of backward: what it kept of x (conv_forward's result) is
 * still there, and its backward gets x NULL. */
static void note_kept(model *m, const float *x, int kept) { m->col_x = kept ? x : NULL; }

static const float *unless_kept(const model *m, const float *x) { return x == m->col_x ? NULL : x; }

static void conv_fwd(model *m, const conv_shape *s, const float *x, const float *w, const float *b, float *y, int n)
{
    note_kept(m, x,
              conv_forward(m->be, x, w, b, y, n, s->C, s->H, s->W, s->F, s->k, s->pad, m->col, m->chunk, s->wide));
}

static void conv_bwd(model *m, int L, const conv_shape *s, const float *x, const float *dy, float *dx, int n)
{
    const layer_params *p = &m->layer[L];
    conv_backward(m->be, unless_kept(m, x), p->w, dy, p->dw, p->db, dx, n, s->C, s->H, s->W, s->F, s->k, s->pad, m->col,
                  m->chunk, s->wide);
    grads_ready(m, L);
}

/* conv_fwd then the bias and ReLU of layer L (net's conv1). */
static void conv_bias_relu_fwd(model *m, int L, const conv_shape *s, const float *x, float *y, int n)
{
    const layer_params *p = &m->layer[L];
    note_kept(m, x,
              conv_bias_relu_forward(m->be, x, p->w, p->b, y, n, s->C, s->H, s->W, s->F, s->k, s->pad, m->col, m->chunk,
                                     s->wide));
}

/* conv_fwd then the pool, bias and ReLU after it (y the convolution's scratch output); the backward, whose
 * input x_relu is a ReLU's output: dx comes back through that ReLU. */
static void conv_pool_fwd(model *m, int L, const conv_shape *s, const float *x, float *y, float *py, int32_t *arg,
                          const nn_flat_dropout *fd, int n)
{
    const layer_params *p = &m->layer[L];
    note_kept(m, x,
              conv_pool_forward(m->be, x, p->w, p->b, y, py, arg, fd, n, s->C, s->H, s->W, s->F, s->k, s->pad, m->col,
                                m->chunk, s->wide));
}

static void pool_conv_bwd(model *m, int L, const conv_shape *s, float *dpy, const nn_flat_dropout *fd, const float *py,
                          const int32_t *arg, const float *x_relu, float *y, float *dx, int n)
{
    const layer_params *p = &m->layer[L];
    pool_conv_backward(m->be, dpy, fd, py, arg, unless_kept(m, x_relu), x_relu, p->w, y, p->dw, p->db, dx, n, s->C,
                       s->H, s->W, s->F, s->k, s->pad, m->col, m->chunk, s->wide);
    grads_ready(m, L);
}

static void linear_fwd(model *m, int L, const float *x, float *y, int n, int in, int out)
{
    linear_forward(m->be, x, m->layer[L].w, m->layer[L].b, y, n, in, out);
}

static void linear_bwd(model *m, int L, const float *x, const float *dy, float *dx, int n, int in, int out)
{
    const layer_params *p = &m->layer[L];
    linear_backward(m->be, x, p->w, dy, p->dw, p->db, dx, n, in, out);
    grads_ready(m, L);
}

/* Training: batch statistics (saved in mean, invstd) that update the running ones S; else those. */
static void batchnorm_fwd(model *m, int L, int S, const float *x, float *y, float *mean, float *invstd, int C,
                          size_t count, int train)
{
    const layer_params *p = &m->layer[L];
    const bn_stats *s = &m->stats[S];
    if (train)
        m->be->batchnorm_forward_train(x, p->w, p->b, y, mean, invstd, s->mean, s->var, s->tracked, C, count,
                                       BN_MOMENTUM, BN_EPS);
    else
        m->be->batchnorm_forward_eval(x, p->w, p->b, s->mean, s->var, y, C, count, BN_EPS);
}

static void batchnorm_bwd(model *m, int L, const float *x, const float *dy, const float *mean, const float *invstd,
                          float *dx, int C, size_t count)
{
    const layer_params *p = &m->layer[L];
    m->be->batchnorm_backward(x, dy, p->w, mean, invstd, dx, p->dw, p->db, C, count);
    grads_ready(m, L);
}

/* --profile: a training pass's time since the last lap goes to the phase name (section of the network
 * named as in PyTorch; a row holds its layer and the activation and pooling after it). Evaluation passes
 * are timed whole by the trainer. */
static void lap(int train, const char *name)
{
    if (train)
        profile_lap(name);
}

/* net's convolutions in one backend call each way (conv_stack.h) where the backend has one for them: 1 if it
 * ran. Its forward keeps no columns of x; its backward releases both layers' gradients. */
static int net_stack(model *m, const float *x, int n, int train, int backward)
{
    const nn_backend *be = m->be;
    if (!be->conv_stack_forward)
        return 0;
    net_acts *a = &m->a.net;
    const layer_params *c1 = &m->layer[NET_CONV1], *c2 = &m->layer[NET_CONV2];
    const conv_shape *s1 = &net_conv1, *s2 = &net_conv2;
    nn_conv_stack s = {.x = x,
                       .w1 = c1->w,
                       .b1 = c1->b,
                       .h1 = a->h1,
                       .w2 = c2->w,
                       .b2 = c2->b,
                       .py = a->p2,
                       .arg = a->arg2,
                       .dpy = a->dp,
                       .dw1 = c1->dw,
                       .db1 = c1->db,
                       .dw2 = c2->dw,
                       .db2 = c2->db,
                       .N = n,
                       .H = s1->H,
                       .W = s1->W,
                       .F1 = s1->F,
                       .F2 = s2->F,
                       .k = s1->k,
                       .ld2 = conv_ld(s2->W, s2->k, s2->pad, s2->wide),
                       .phase1 = train ? backward ? "conv1 backward" : "conv1 forward" : NULL,
                       .phase2 = train ? backward ? "conv2 backward" : "conv2 forward" : NULL,
                       .poll = m->poll,
                       .poll_ctx = m->poll_ctx,
                       .phase_poll = train ? "all-reduce wait" : NULL}; /* train.c's phase of the wait */
    if (!backward) {
        note_kept(m, x, 0);
        return be->conv_stack_forward(&s);
    }
    if (!be->conv_stack_backward(&s))
        return 0;
    grads_ready(m, NET_CONV2);
    grads_ready(m, NET_CONV1);
    return 1;
}

/* net's second dropout (the key's layer number, the drop probability): in net_forward, or in net_head. */
enum { NET_DROP2_LAYER = 1 };
#define NET_DROP2_P 0.5f

/* Training on a backend with the whole head in one call (backend.h's head_train): forward stops at fc1's
 * product, net_head adds its bias and runs the rest, the loss and fc1's bias gradient, backward starts at
 * fc1's weights. */
static int net_head_fused(const model *m, int train) { return train && m->be->head_train; }

/* net: conv1 -> ReLU -> conv2 -> ReLU -> max-pool -> dropout(.25) -> fc1 -> ReLU -> dropout(.5) -> fc2.
 * conv2's bias and ReLU run after the pool, on a quarter of the values: max(x) + b = max(x + b),
 * and max and ReLU commute (gradients agree too: the argmax is the same). conv2 uses the wide
 * layout (rows of NET_S1, NET_S2 used); the pool reads only the used columns and its backward zeroes
 * the rest, as conv_backward requires. */
static void net_forward(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    nn_flat_dropout fd = {.f = a->f, .mask = train ? a->mask1 : NULL, .ids = ids, .key = key, .layer = 0, .p = 0.25f};
    const nn_flat_dropout *fused = be->pool_flatten_dropout_forward ? &fd : NULL; /* dropout1 in conv2's pass */
    if (!net_stack(m, x, n, train, 0)) {
        conv_bias_relu_fwd(m, NET_CONV1, &net_conv1, x, a->h1, n);
        lap(train, "conv1 forward");
        conv_pool_fwd(m, NET_CONV2, &net_conv2, a->h1, a->a2, a->p2, a->arg2, fused, n);
    } else {
        fused = NULL;
    }
    lap(train, "conv2 forward");
    if (!fused)
        be->flatten_dropout_forward(a->p2, a->f, fd.mask, NET_C2, n, NET_PP, ids, key, fd.layer, fd.p);
    lap(train, "dropout1 forward");
    if (net_head_fused(m, train)) { /* net_head does the rest, from fc1's bias */
        linear_forward(be, a->f, m->layer[NET_FC1].w, NULL, a->h3, n, NET_FLAT, NET_HIDDEN);
        lap(train, "fc1 forward");
        return;
    }
    linear_relu_forward(be, a->f, m->layer[NET_FC1].w, m->layer[NET_FC1].b, a->h3, n, NET_FLAT, NET_HIDDEN);
    lap(train, "fc1 forward");
    if (train)
        be->dropout_forward(a->h3, a->mask2, n, NET_HIDDEN, ids, key, NET_DROP2_LAYER, NET_DROP2_P);
    lap(train, "dropout2 forward");
    linear_fwd(m, NET_FC2, a->h3, m->logits, n, NET_HIDDEN, CLASSES);
    lap(train, "fc2 forward");
}

/* From fc1's product to dh3 and fc1's bias gradient in one backend call, when the backend has it (head.h). */
static int net_head(model *m, const uint8_t *labels, const uint64_t *ids, uint64_t key, int n, float grad_scale)
{
    if (!net_head_fused(m, 1))
        return 0;
    net_acts *a = &m->a.net;
    const layer_params *p = &m->layer[NET_FC2];
    nn_head h = {.h = a->h3,
                 .hb = m->layer[NET_FC1].b,
                 .dhb = m->layer[NET_FC1].db,
                 .ids = ids,
                 .key = key,
                 .layer = NET_DROP2_LAYER,
                 .p = NET_DROP2_P,
                 .w = p->w,
                 .b = p->b,
                 .dw = p->dw,
                 .db = p->db,
                 .labels = labels,
                 .g = grad_scale,
                 .z = m->logits,
                 .logp = m->logp,
                 .dz = m->dlogits,
                 .loss = m->loss,
                 .loss_sum = &m->loss_sum[0],
                 .dh = a->dh3,
                 .N = n,
                 .D = NET_HIDDEN,
                 .K = CLASSES};
    m->be->head_train(&h);
    profile_lap("head");
    grads_ready(m, NET_FC2);
    return 1;
}

static void net_backward(model *m, const float *x, int n)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    size_t N = (size_t)n;
    if (!net_head_fused(m, 1)) { /* else net_head left dh3 */
        linear_bwd(m, NET_FC2, a->h3, m->dlogits, a->dh3, n, NET_HIDDEN, CLASSES);
        profile_lap("fc2 backward");
        be->dropout_backward(a->dh3, a->mask2, N * NET_HIDDEN);
        profile_lap("dropout2 backward");
        be->relu_backward(a->dh3, a->h3, N * NET_HIDDEN); /* h3 after dropout: positive exactly where kept and active */
    }
    const layer_params *fc1 = &m->layer[NET_FC1]; /* net_head added its bias gradient */
    linear_backward(be, a->f, fc1->w, a->dh3, fc1->dw, net_head_fused(m, 1) ? NULL : fc1->db, a->df, n, NET_FLAT,
                    NET_HIDDEN);
    grads_ready(m, NET_FC1);
    profile_lap("fc1 backward");
    nn_flat_dropout fd = {.f = a->df, .mask = a->mask1}; /* dropout1's backward in conv2's pass */
    const nn_flat_dropout *fused = be->dropout_pool_backward_sum && !be->conv_stack_backward ? &fd : NULL;
    if (!fused)
        be->dropout_unflatten_backward(a->df, a->mask1, a->dp, NET_C2, n, NET_PP);
    profile_lap("dropout1 backward");
    if (!net_stack(m, x, n, 1, 1)) {
        pool_conv_bwd(m, NET_CONV2, &net_conv2, a->dp, fused, a->p2, a->arg2, a->h1, a->a2, a->dh1, n); /* a2 scratch */
        profile_lap("conv2 backward");
        conv_bwd(m, NET_CONV1, &net_conv1, x, a->dh1, NULL, n);
    }
    profile_lap("conv1 backward");
}

/* convnet: [conv 5x5 pad 2 -> BatchNorm -> ReLU -> max-pool] x 2 -> fc. ReLU after the pool as in net.
 * No dropout: ids and key are unused. */
static void convnet_forward(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train)
{
    (void)ids, (void)key;
    const nn_backend *be = m->be;
    convnet_acts *a = &m->a.cnn;
    size_t N = (size_t)n;
    conv_fwd(m, &convnet_conv1, x, m->layer[CNN_CONV1].w, m->layer[CNN_CONV1].b, a->a1, n);
    lap(train, "layer1.0 forward");
    batchnorm_fwd(m, CNN_BN1, CNN_STATS1, a->a1, a->b1, a->mean1, a->invstd1, CNN_C1, N * CNN_P1, train);
    lap(train, "layer1.1 forward");
    be->maxpool2_relu_forward(a->b1, NULL, a->p1, a->arg1, CNN_C1, n, CNN_S1, CNN_S1, CNN_S1);
    lap(train, "layer1.2-3 forward");
    conv_fwd(m, &convnet_conv2, a->p1, m->layer[CNN_CONV2].w, m->layer[CNN_CONV2].b, a->a2, n);
    lap(train, "layer2.0 forward");
    batchnorm_fwd(m, CNN_BN2, CNN_STATS2, a->a2, a->b2, a->mean2, a->invstd2, CNN_C2, N * CNN_P2, train);
    lap(train, "layer2.1 forward");
    be->maxpool2_relu_forward(a->b2, NULL, a->p2, a->arg2, CNN_C2, n, CNN_S2, CNN_S2, CNN_S2);
    lap(train, "layer2.2-3 forward");
    be->flatten_dropout_forward(a->p2, a->f, NULL, CNN_C2, n, CNN_PP2, NULL, 0, 0, 0.0f);
    linear_fwd(m, CNN_FC, a->f, m->logits, n, CNN_FLAT, CLASSES);
    lap(train, "fc forward");
}

static void convnet_backward(model *m, const float *x, int n)
{
    const nn_backend *be = m->be;
    convnet_acts *a = &m->a.cnn;
    size_t N = (size_t)n;
    linear_bwd(m, CNN_FC, a->f, m->dlogits, a->df, n, CNN_FLAT, CLASSES);
    be->dropout_unflatten_backward(a->df, NULL, a->dp2, CNN_C2, n, CNN_PP2);
    profile_lap("fc backward");
    /* Gradients w.r.t. the BatchNorm outputs, then (in place) inputs, replace b2 and b1. */
    be->relu_maxpool2_backward(a->dp2, a->p2, a->arg2, a->b2, CNN_C2 * n, CNN_S2, CNN_S2, CNN_S2);
    profile_lap("layer2.2-3 backward");
    batchnorm_bwd(m, CNN_BN2, a->a2, a->b2, a->mean2, a->invstd2, a->b2, CNN_C2, N * CNN_P2);
    profile_lap("layer2.1 backward");
    conv_bwd(m, CNN_CONV2, &convnet_conv2, a->p1, a->b2, a->dp1, n);
    profile_lap("layer2.0 backward");
    be->relu_maxpool2_backward(a->dp1, a->p1, a->arg1, a->b1, CNN_C1 * n, CNN_S1, CNN_S1, CNN_S1);
    profile_lap("layer1.2-3 backward");
    batchnorm_bwd(m, CNN_BN1, a->a1, a->b1, a->mean1, a->invstd1, a->b1, CNN_C1, N * CNN_P1);
    profile_lap("layer1.1 backward");
    conv_bwd(m, CNN_CONV1, &convnet_conv1, x, a->b1, NULL, n);
    profile_lap("layer1.0 backward");
}

const char *const model_kind_names[] = {"net", "convnet", NULL};

/* By model_kind. The recipes: PyTorch's MNIST example (net) and the convnet example's. */
const architecture architectures[MODEL_KINDS] = {
    [MODEL_NET] = {.params = net_params,
                   .nlayers = NET_LAYERS,
                   .alloc = net_alloc,
                   .forward = net_forward,
                   .backward = net_backward,
                   .head = net_head,
                   .recipe = {.batch = 64, .optimizer = OPTIM_ADADELTA, .lr = 1.0}},
    [MODEL_CONVNET] = {.params = convnet_params,
                       .buffers = convnet_buffers,
                       .nlayers = CNN_LAYERS,
                       .nstats = CNN_STATS,
                       .alloc = convnet_alloc,
                       .forward = convnet_forward,
                       .backward = convnet_backward,
                       .recipe = {.batch = 100, .optimizer = OPTIM_SGD, .lr = 1e-4, .lr_times_world = 1}},
};
_Static_assert(NET_LAYERS <= MAX_LAYERS && CNN_LAYERS <= MAX_LAYERS && CNN_STATS <= MAX_STATS,
               "model tables too small");

int model_kind_of(const char *name)
{
    for (int k = 0; name && k < MODEL_KINDS; k++)
        if (strcmp(name, model_kind_names[k]) == 0)
            return k;
    return -1;
}

const model_recipe *model_recipe_of(model_kind kind) { return &architectures[kind].recipe; }
