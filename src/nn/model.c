#include "nn/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "nn/layers.h"
#include "data/mnist.h"
#include "nn/ops.h"
#include "base/profile.h"
#include "base/rng.h"

#define BN_MOMENTUM 0.1f
#define BN_EPS 1e-5f
#define MAX_LAYERS 5 /* layers with parameters */
#define MAX_STATS 2  /* BatchNorm layers */
#define MAX_ALLOCS 40

/* The input: IN_C channels of IN_SIDE x IN_SIDE pixels (mnist.h); CLASSES outputs. */
enum { IN_C = 1, IN_SIDE = MNIST_ROWS, CLASSES = MNIST_CLASSES };

/* How a tensor is created and initialised: fan_in > 0 draws U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * fan_in 0 fills with value. */
typedef struct {
    const char *name;
    int ndim;
    int shape[4];
    int fan_in;
    float value;
} tensor_spec;

/* Every layer with parameters has a weight and a bias: layer L's are parameter tensors WEIGHT(L) and
 * BIAS(L), in state_dict order. BatchNorm layer S's running statistics are buffer tensors STATS(S)
 * (running_mean), + 1 (running_var) and + 2 (num_batches_tracked). */
#define LAYER_TENSORS 2
#define STATS_TENSORS 3
#define WEIGHT(L) (LAYER_TENSORS * (L))
#define BIAS(L) (WEIGHT(L) + 1)
#define STATS(S) (STATS_TENSORS * (S))

/* state_dict entries of a layer, PyTorch's shapes and default init: a convolution's or linear layer's
 * weight and bias draw with fan_in = inputs per output; BatchNorm starts at weight 1, bias 0, running
 * mean 0, var 1. */
#define CONV_PARAMS(L, name, F, C, k) \
    [WEIGHT(L)] = {name ".weight", 4, {F, C, k, k}, (C) * (k) * (k), 0}, {name ".bias", 1, {F}, (C) * (k) * (k), 0}
#define LINEAR_PARAMS(L, name, out, in) \
    [WEIGHT(L)] = {name ".weight", 2, {out, in}, in, 0}, {name ".bias", 1, {out}, in, 0}
#define BN_PARAMS(L, name, C) [WEIGHT(L)] = {name ".weight", 1, {C}, 0, 1}, {name ".bias", 1, {C}, 0, 0}
#define BN_BUFFERS(S, name, C)                                                                                     \
    [STATS(S)] = {name ".running_mean", 1, {C}, 0, 0}, {name ".running_var", 1, {C}, 0, 1},                        \
    {name ".num_batches_tracked", 0, {0}, 0, 0}

/* A stride-1 convolution (layers.h): input C x H x W, F filters of k x k, zero padding pad, wide output. */
typedef struct {
    int C, H, W, F, k, pad, wide;
} conv_shape;

/* net: every size derives from these. Sides S of square planes, P their areas (conv2's in wide rows). */
enum {
    NET_K = 3, NET_C1 = 32, NET_C2 = 64, NET_HIDDEN = 128,
    NET_S1 = CONV_OUT(IN_SIDE, NET_K, 0), /* conv1's output */
    NET_S2 = CONV_OUT(NET_S1, NET_K, 0),  /* conv2's output, in rows of NET_S1 */
    NET_SP = NET_S2 / 2,                  /* after the pool */
    NET_P1 = NET_S1 * NET_S1, NET_P2 = NET_S2 * NET_S1, NET_PP = NET_SP * NET_SP,
    NET_FLAT = NET_C2 * NET_PP, /* fc1's inputs */
};
enum { NET_CONV1, NET_CONV2, NET_FC1, NET_FC2, NET_LAYERS };

static const tensor_spec net_params[LAYER_TENSORS * NET_LAYERS] = {
    CONV_PARAMS(NET_CONV1, "conv1", NET_C1, IN_C, NET_K), CONV_PARAMS(NET_CONV2, "conv2", NET_C2, NET_C1, NET_K),
    LINEAR_PARAMS(NET_FC1, "fc1", NET_HIDDEN, NET_FLAT), LINEAR_PARAMS(NET_FC2, "fc2", CLASSES, NET_HIDDEN),
};
static const conv_shape net_conv1 = {.C = IN_C, .H = IN_SIDE, .W = IN_SIDE, .F = NET_C1, .k = NET_K},
                        net_conv2 = {.C = NET_C1, .H = NET_S1, .W = NET_S1, .F = NET_C2, .k = NET_K, .wide = 1};

/* convnet: every size derives from these. */
enum {
    CNN_K = 5, CNN_PAD = 2, CNN_C1 = 16, CNN_C2 = 32,
    CNN_S1 = CONV_OUT(IN_SIDE, CNN_K, CNN_PAD), /* conv1's output */
    CNN_SP1 = CNN_S1 / 2,                       /* after pool 1 */
    CNN_S2 = CONV_OUT(CNN_SP1, CNN_K, CNN_PAD), /* conv2's output */
    CNN_SP2 = CNN_S2 / 2,                       /* after pool 2 */
    CNN_P1 = CNN_S1 * CNN_S1, CNN_PP1 = CNN_SP1 * CNN_SP1, CNN_P2 = CNN_S2 * CNN_S2, CNN_PP2 = CNN_SP2 * CNN_SP2,
    CNN_FLAT = CNN_C2 * CNN_PP2, /* fc's inputs */
};
enum { CNN_CONV1, CNN_BN1, CNN_CONV2, CNN_BN2, CNN_FC, CNN_LAYERS };
enum { CNN_STATS1, CNN_STATS2, CNN_STATS };

static const tensor_spec convnet_params[LAYER_TENSORS * CNN_LAYERS] = {
    CONV_PARAMS(CNN_CONV1, "layer1.0", CNN_C1, IN_C, CNN_K), BN_PARAMS(CNN_BN1, "layer1.1", CNN_C1),
    CONV_PARAMS(CNN_CONV2, "layer2.0", CNN_C2, CNN_C1, CNN_K), BN_PARAMS(CNN_BN2, "layer2.1", CNN_C2),
    LINEAR_PARAMS(CNN_FC, "fc", CLASSES, CNN_FLAT),
};
static const tensor_spec convnet_buffers[STATS_TENSORS * CNN_STATS] = {
    BN_BUFFERS(CNN_STATS1, "layer1.1", CNN_C1), BN_BUFFERS(CNN_STATS2, "layer2.1", CNN_C2),
};
static const conv_shape
    convnet_conv1 = {.C = IN_C, .H = IN_SIDE, .W = IN_SIDE, .F = CNN_C1, .k = CNN_K, .pad = CNN_PAD},
    convnet_conv2 = {.C = CNN_C1, .H = CNN_SP1, .W = CNN_SP1, .F = CNN_C2, .k = CNN_K, .pad = CNN_PAD};

/* Activations (forward) and their gradients (backward); buffers are reused where the forward value
 * is dead by the time its gradient is written. */
typedef struct {
    float *h1, *a2, *p2, *f, *mask1, *h3, *mask2, *dh3, *df, *dp, *dh1;
    int32_t *arg2;
} net_acts;

typedef struct {
    float *a1, *b1, *p1, *a2, *b2, *p2, *f, *df, *dp1, *dp2;
    float *mean1, *invstd1, *mean2, *invstd2;
    int32_t *arg1, *arg2;
} convnet_acts;

/* A network: its state_dict tables and passes. forward applies dropout (if the network has any, keyed
 * by ids and key) only when train; backward follows a forward with train set. */
typedef struct {
    const tensor_spec *params, *buffers;
    int nlayers, nstats;
    model_recipe recipe;
    void (*alloc)(model *m); /* activations and im2col scratch */
    void (*forward)(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train);
    void (*backward)(model *m, const float *x, int n);
} architecture;

/* Named views into the flat buffers: a layer's parameters and gradients, a BatchNorm's running stats. */
typedef struct {
    float *w, *b, *dw, *db;
} layer_params;

typedef struct {
    float *mean, *var, *tracked;
} bn_stats;

struct model {
    const nn_backend *be;
    const architecture *arch;
    model_kind kind;
    int capacity, chunk;
    int ntensors, nbuffers;
    tensor_desc tensors[LAYER_TENSORS * MAX_LAYERS], buffers[STATS_TENSORS * MAX_STATS];
    size_t nparams, nbufs;
    float *params, *grads, *bufs, *col;
    const float *col_x; /* the input whose im2col (or backend copy) the last conv_forward kept, or NULL */
    layer_params layer[MAX_LAYERS];
    bn_stats stats[MAX_STATS];
    float *logits, *logp, *dlogits; /* [capacity][CLASSES] */
    float *loss;                    /* [capacity] */
    double *loss_sum;               /* [2], backend memory: training losses until model_take_loss; evaluation */
    grad_ready_fn hook;
    void *hook_ctx;
    union {
        net_acts net;
        convnet_acts cnn;
    } a;
    void *mem[MAX_ALLOCS];
    int nmem;
};

static void *model_mem(model *m, size_t bytes)
{
    if (m->nmem == MAX_ALLOCS)
        die(EX_SOFTWARE, "model allocation table full");
    return m->mem[m->nmem++] = m->be->alloc(bytes);
}

static float *floats(model *m, size_t count)
{
    return model_mem(m, count * sizeof(float));
}

static size_t describe(const tensor_spec *spec, int n, tensor_desc *desc)
{
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        size_t count = 1;
        for (int d = 0; d < spec[i].ndim; d++)
            count *= (size_t)spec[i].shape[d];
        desc[i] = (tensor_desc){.name = spec[i].name, .ndim = spec[i].ndim, .offset = offset, .count = count};
        memcpy(desc[i].shape, spec[i].shape, sizeof desc[i].shape);
        offset += count;
    }
    return offset;
}

static void bind_tensors(model *m)
{
    for (int L = 0; L < m->arch->nlayers; L++) {
        size_t w = m->tensors[WEIGHT(L)].offset, b = m->tensors[BIAS(L)].offset;
        m->layer[L] = (layer_params){m->params + w, m->params + b, m->grads + w, m->grads + b};
    }
    for (int S = 0; S < m->arch->nstats; S++) {
        const tensor_desc *t = &m->buffers[STATS(S)];
        m->stats[S] = (bn_stats){m->bufs + t[0].offset, m->bufs + t[1].offset, m->bufs + t[2].offset};
    }
}

/* im2col scratch for the larger of a network's two convolutions. */
static float *col_scratch(model *m, const conv_shape *s1, const conv_shape *s2)
{
    size_t a = conv_scratch(s1->C, s1->H, s1->W, s1->k, s1->pad, m->chunk, s1->wide),
           b = conv_scratch(s2->C, s2->H, s2->W, s2->k, s2->pad, m->chunk, s2->wide);
    return floats(m, a > b ? a : b);
}

static void net_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    net_acts *a = &m->a.net;
    a->h1 = floats(m, NET_C1 * N * NET_P1);
    a->a2 = floats(m, NET_C2 * N * NET_P2); /* wide */
    a->p2 = floats(m, NET_C2 * N * NET_PP);
    a->arg2 = model_mem(m, NET_C2 * N * NET_PP * sizeof(int32_t));
    a->f = floats(m, N * NET_FLAT);
    a->mask1 = floats(m, N * NET_FLAT);
    a->h3 = floats(m, N * NET_HIDDEN);
    a->mask2 = floats(m, N * NET_HIDDEN);
    a->dh3 = floats(m, N * NET_HIDDEN);
    a->df = floats(m, N * NET_FLAT);
    a->dp = floats(m, NET_C2 * N * NET_PP);
    a->dh1 = floats(m, NET_C1 * N * NET_P1);
    m->col = col_scratch(m, &net_conv1, &net_conv2);
}

static void convnet_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    convnet_acts *a = &m->a.cnn;
    a->a1 = floats(m, CNN_C1 * N * CNN_P1);
    a->b1 = floats(m, CNN_C1 * N * CNN_P1);
    a->p1 = floats(m, CNN_C1 * N * CNN_PP1);
    a->arg1 = model_mem(m, CNN_C1 * N * CNN_PP1 * sizeof(int32_t));
    a->a2 = floats(m, CNN_C2 * N * CNN_P2);
    a->b2 = floats(m, CNN_C2 * N * CNN_P2);
    a->p2 = floats(m, CNN_C2 * N * CNN_PP2);
    a->arg2 = model_mem(m, CNN_C2 * N * CNN_PP2 * sizeof(int32_t));
    a->f = floats(m, N * CNN_FLAT);
    a->df = floats(m, N * CNN_FLAT);
    a->dp2 = floats(m, CNN_C2 * N * CNN_PP2);
    a->dp1 = floats(m, CNN_C1 * N * CNN_PP1);
    a->mean1 = floats(m, CNN_C1);
    a->invstd1 = floats(m, CNN_C1);
    a->mean2 = floats(m, CNN_C2);
    a->invstd2 = floats(m, CNN_C2);
    m->col = col_scratch(m, &convnet_conv1, &convnet_conv2);
}

/* Layer L's parameter gradients are final: hand their range to the hook. */
static void grads_ready(model *m, int L)
{
    if (m->hook) {
        const tensor_desc *w = &m->tensors[WEIGHT(L)], *b = &m->tensors[BIAS(L)];
        m->hook(m->hook_ctx, w->offset, b->offset + b->count - w->offset);
    }
}

/* The layers on the model's backend and scratch; each backward releases its layer's gradients.
 * The last convolution of forward is the first of backward: what it kept of x (conv_forward's result) is
 * still there, and its backward gets x NULL. */
static void note_kept(model *m, const float *x, int kept)
{
    m->col_x = kept ? x : NULL;
}

static const float *unless_kept(const model *m, const float *x)
{
    return x == m->col_x ? NULL : x;
}

static void conv_fwd(model *m, const conv_shape *s, const float *x, const float *w, const float *b, float *y, int n)
{
    note_kept(m, x,
              conv_forward(m->be, x, w, b, y, n, s->C, s->H, s->W, s->F, s->k, s->pad, m->col, m->chunk, s->wide));
}

static void conv_bwd(model *m, int L, const conv_shape *s, const float *x, const float *dy, float *dx, int n)
{
    const layer_params *p = &m->layer[L];
    conv_backward(m->be, unless_kept(m, x), p->w, dy, p->dw, p->db, dx, n, s->C, s->H, s->W, s->F, s->k, s->pad,
                  m->col, m->chunk, s->wide);
    grads_ready(m, L);
}

/* conv_fwd then the pool, bias and ReLU after it (y the convolution's scratch output); the backward, whose
 * input x_relu is a ReLU's output: dx comes back through that ReLU. */
static void conv_pool_fwd(model *m, int L, const conv_shape *s, const float *x, float *y, float *py, int32_t *arg,
                          int n)
{
    const layer_params *p = &m->layer[L];
    note_kept(m, x, conv_pool_forward(m->be, x, p->w, p->b, y, py, arg, n, s->C, s->H, s->W, s->F, s->k, s->pad,
                                      m->col, m->chunk, s->wide));
}

static void pool_conv_bwd(model *m, int L, const conv_shape *s, float *dpy, const float *py, const int32_t *arg,
                          const float *x_relu, float *y, float *dx, int n)
{
    const layer_params *p = &m->layer[L];
    pool_conv_backward(m->be, dpy, py, arg, unless_kept(m, x_relu), x_relu, p->w, y, p->dw, p->db, dx, n, s->C, s->H,
                       s->W, s->F, s->k, s->pad, m->col, m->chunk, s->wide);
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

/* net: conv1 -> ReLU -> conv2 -> ReLU -> max-pool -> dropout(.25) -> fc1 -> ReLU -> dropout(.5) -> fc2.
 * conv2's bias and ReLU run after the pool, on a quarter of the values: max(x) + b = max(x + b),
 * and max and ReLU commute (gradients agree too: the argmax is the same). conv2 uses the wide
 * layout (rows of NET_S1, NET_S2 used); the pool reads only the used columns and its backward zeroes
 * the rest, as conv_backward requires. */
static void net_forward(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    size_t N = (size_t)n;
    conv_fwd(m, &net_conv1, x, m->layer[NET_CONV1].w, NULL, a->h1, n);
    be->bias_relu_forward(a->h1, m->layer[NET_CONV1].b, NET_C1, N * NET_P1);
    lap(train, "conv1 forward");
    conv_pool_fwd(m, NET_CONV2, &net_conv2, a->h1, a->a2, a->p2, a->arg2, n);
    lap(train, "conv2 forward");
    be->flatten_dropout_forward(a->p2, a->f, train ? a->mask1 : NULL, NET_C2, n, NET_PP, ids, key, 0, 0.25f);
    lap(train, "dropout1 forward");
    linear_fwd(m, NET_FC1, a->f, a->h3, n, NET_FLAT, NET_HIDDEN);
    be->relu_forward(a->h3, N * NET_HIDDEN);
    lap(train, "fc1 forward");
    if (train)
        be->dropout_forward(a->h3, a->mask2, n, NET_HIDDEN, ids, key, 1, 0.5f);
    lap(train, "dropout2 forward");
    linear_fwd(m, NET_FC2, a->h3, m->logits, n, NET_HIDDEN, CLASSES);
    lap(train, "fc2 forward");
}

static void net_backward(model *m, const float *x, int n)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    size_t N = (size_t)n;
    linear_bwd(m, NET_FC2, a->h3, m->dlogits, a->dh3, n, NET_HIDDEN, CLASSES);
    profile_lap("fc2 backward");
    be->dropout_backward(a->dh3, a->mask2, N * NET_HIDDEN);
    profile_lap("dropout2 backward");
    be->relu_backward(a->dh3, a->h3, N * NET_HIDDEN); /* h3 after dropout: positive exactly where kept and active */
    linear_bwd(m, NET_FC1, a->f, a->dh3, a->df, n, NET_FLAT, NET_HIDDEN);
    profile_lap("fc1 backward");
    be->dropout_unflatten_backward(a->df, a->mask1, a->dp, NET_C2, n, NET_PP);
    profile_lap("dropout1 backward");
    pool_conv_bwd(m, NET_CONV2, &net_conv2, a->dp, a->p2, a->arg2, a->h1, a->a2, a->dh1, n); /* a2 as scratch */
    profile_lap("conv2 backward");
    conv_bwd(m, NET_CONV1, &net_conv1, x, a->dh1, NULL, n);
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
static const architecture architectures[MODEL_KINDS] = {
    [MODEL_NET] = {.params = net_params, .nlayers = NET_LAYERS, .alloc = net_alloc, .forward = net_forward,
                   .backward = net_backward, .recipe = {.batch = 64, .optimizer = OPTIM_ADADELTA, .lr = 1.0}},
    [MODEL_CONVNET] = {.params = convnet_params, .buffers = convnet_buffers, .nlayers = CNN_LAYERS,
                       .nstats = CNN_STATS, .alloc = convnet_alloc, .forward = convnet_forward,
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

model *model_create_on(const nn_backend *be, model_kind kind, int capacity)
{
    if ((int)kind < 0 || kind >= MODEL_KINDS)
        return NULL;
    const architecture *arch = &architectures[kind];
    if (capacity < 1)
        die(EX_SOFTWARE, "model capacity must be positive, not %d", capacity);
    model *m = xcalloc(1, sizeof *m);
    m->be = be;
    m->arch = arch;
    m->kind = kind;
    m->capacity = capacity;
    m->chunk = capacity < be->chunk ? capacity : be->chunk;
    m->ntensors = LAYER_TENSORS * arch->nlayers;
    m->nbuffers = STATS_TENSORS * arch->nstats;
    m->nparams = describe(arch->params, m->ntensors, m->tensors);
    m->nbufs = describe(arch->buffers, m->nbuffers, m->buffers);
    m->params = floats(m, m->nparams);
    m->grads = floats(m, m->nparams);
    m->bufs = floats(m, m->nbufs);
    bind_tensors(m);
    be->zero(m->grads, m->nparams * sizeof(float));
    m->logits = floats(m, (size_t)capacity * CLASSES);
    m->logp = floats(m, (size_t)capacity * CLASSES);
    m->dlogits = floats(m, (size_t)capacity * CLASSES);
    m->loss = floats(m, (size_t)capacity);
    m->loss_sum = model_mem(m, 2 * sizeof(double));
    be->zero(m->loss_sum, 2 * sizeof(double));
    arch->alloc(m);
    model_init_params(m, 0);
    return m;
}

void model_free(model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nmem; i++)
        m->be->free(m->mem[i]);
    free(m);
}

const char *model_name(const model *m) { return model_kind_names[m->kind]; }
const nn_backend *model_backend(const model *m) { return m->be; }
int model_capacity(const model *m) { return m->capacity; }
int model_num_tensors(const model *m) { return m->ntensors; }
size_t model_num_params(const model *m) { return m->nparams; }
float *model_params(model *m) { return m->params; }
float *model_grads(model *m) { return m->grads; }
int model_num_buffers(const model *m) { return m->nbuffers; }
size_t model_buffer_size(const model *m) { return m->nbufs; }
float *model_buffers(model *m) { return m->bufs; }

const tensor_desc *model_tensor(const model *m, int i)
{
    return i >= 0 && i < m->ntensors ? &m->tensors[i] : NULL;
}

const tensor_desc *model_buffer(const model *m, int i)
{
    return i >= 0 && i < m->nbuffers ? &m->buffers[i] : NULL;
}

static void init_tensors(const tensor_spec *spec, const tensor_desc *desc, int n, float *base, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        float *p = base + desc[i].offset;
        if (spec[i].fan_in > 0) {
            uint64_t key = rng_key(seed, (uint64_t)i);
            float bound = 1.0f / sqrtf((float)spec[i].fan_in);
            for (size_t j = 0; j < desc[i].count; j++)
                p[j] = op_init_uniform(key, j, bound);
        } else {
            for (size_t j = 0; j < desc[i].count; j++)
                p[j] = spec[i].value;
        }
    }
}

void model_init_params(model *m, uint64_t seed)
{
    float *p = xmalloc(m->nparams * sizeof *p), *b = xmalloc((m->nbufs + 1) * sizeof *b);
    init_tensors(m->arch->params, m->tensors, m->ntensors, p, seed);
    init_tensors(m->arch->buffers, m->buffers, m->nbuffers, b, seed);
    model_upload(m, p, b);
    free(p);
    free(b);
}

void model_upload(model *m, const float *params, const float *buffers)
{
    if (params)
        m->be->upload(m->params, params, m->nparams * sizeof *params);
    if (buffers && m->nbufs)
        m->be->upload(m->bufs, buffers, m->nbufs * sizeof *buffers);
}

void model_download(const model *m, float *params, float *buffers)
{
    if (params)
        m->be->download(params, m->params, m->nparams * sizeof *params);
    if (buffers && m->nbufs)
        m->be->download(buffers, m->bufs, m->nbufs * sizeof *buffers);
}

void model_set_grad_hook(model *m, grad_ready_fn fn, void *ctx)
{
    m->hook = fn;
    m->hook_ctx = ctx;
}

/* Labels are not checked here (they may live on the GPU): the shard reader rejects any above 9. */
static void check_batch(const model *m, int n)
{
    if (n < 0 || n > m->capacity)
        die(EX_SOFTWARE, "batch of %d samples for a model of capacity %d", n, m->capacity);
}

void model_train_batch(model *m, const float *x, const uint8_t *labels, const uint64_t *ids, int n,
                       uint64_t dropout_key, float grad_scale)
{
    const nn_backend *be = m->be;
    check_batch(m, n);
    if (n == 0) {
        for (int L = m->arch->nlayers - 1; L >= 0; L--) /* back to front, as in backward */
            grads_ready(m, L);
        return;
    }
    m->arch->forward(m, x, n, ids, dropout_key, 1);
    be->log_softmax_nll_forward(m->logits, labels, m->logp, m->loss, n, CLASSES);
    /* Before backward, so the gradient all-reduce can start the moment backward's last hook returns. */
    be->add_losses(m->loss, n, &m->loss_sum[0]);
    be->log_softmax_nll_backward(m->logp, labels, m->dlogits, n, CLASSES, grad_scale);
    profile_lap("loss");
    m->arch->backward(m, x, n);
}

/* The double at sum, reset to 0 (a GPU waits here for the work queued before). */
static double take(const model *m, double *sum)
{
    double v;
    m->be->download(&v, sum, sizeof v);
    m->be->zero(sum, sizeof v);
    return v;
}

double model_take_loss(model *m) { return take(m, &m->loss_sum[0]); }

double model_forward_backward(model *m, const float *x, const uint8_t *labels, const uint64_t *ids, int n,
                              uint64_t dropout_key, float grad_scale)
{
    model_train_batch(m, x, labels, ids, n, dropout_key, grad_scale);
    return model_take_loss(m);
}

double model_evaluate(model *m, const float *x, const uint8_t *labels, int n, long *correct)
{
    const nn_backend *be = m->be;
    check_batch(m, n);
    if (n == 0)
        return 0.0;
    m->arch->forward(m, x, n, NULL, 0, 0);
    be->log_softmax_nll_forward(m->logits, labels, m->logp, m->loss, n, CLASSES);
    *correct += be->count_correct(m->logp, labels, n, CLASSES);
    be->add_losses(m->loss, n, &m->loss_sum[1]);
    return take(m, &m->loss_sum[1]);
}
