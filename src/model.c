#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "layers.h"
#include "rng.h"

#define BN_MOMENTUM 0.1f
#define BN_EPS 1e-5f
#define CLASSES 10
#define MAX_TENSORS 10
#define MAX_BUFFERS 6
#define MAX_ALLOCS 40

/* How a tensor is created and initialised: fan_in > 0 draws U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * fan_in 0 fills with value. */
typedef struct {
    const char *name;
    int ndim;
    int shape[4];
    int fan_in;
    float value;
} tensor_spec;

static const tensor_spec net_params[] = {
    {"conv1.weight", 4, {32, 1, 3, 3}, 9, 0}, {"conv1.bias", 1, {32}, 9, 0},
    {"conv2.weight", 4, {64, 32, 3, 3}, 288, 0}, {"conv2.bias", 1, {64}, 288, 0},
    {"fc1.weight", 2, {128, 9216}, 9216, 0}, {"fc1.bias", 1, {128}, 9216, 0},
    {"fc2.weight", 2, {10, 128}, 128, 0}, {"fc2.bias", 1, {10}, 128, 0},
};

static const tensor_spec convnet_params[] = {
    {"layer1.0.weight", 4, {16, 1, 5, 5}, 25, 0}, {"layer1.0.bias", 1, {16}, 25, 0},
    {"layer1.1.weight", 1, {16}, 0, 1}, {"layer1.1.bias", 1, {16}, 0, 0},
    {"layer2.0.weight", 4, {32, 16, 5, 5}, 400, 0}, {"layer2.0.bias", 1, {32}, 400, 0},
    {"layer2.1.weight", 1, {32}, 0, 1}, {"layer2.1.bias", 1, {32}, 0, 0},
    {"fc.weight", 2, {10, 1568}, 1568, 0}, {"fc.bias", 1, {10}, 1568, 0},
};

static const tensor_spec convnet_buffers[] = {
    {"layer1.1.running_mean", 1, {16}, 0, 0}, {"layer1.1.running_var", 1, {16}, 0, 1},
    {"layer1.1.num_batches_tracked", 0, {0}, 0, 0},
    {"layer2.1.running_mean", 1, {32}, 0, 0}, {"layer2.1.running_var", 1, {32}, 0, 1},
    {"layer2.1.num_batches_tracked", 0, {0}, 0, 0},
};

enum { NET, CONVNET };

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

struct model {
    const nn_backend *be;
    int kind, capacity, chunk;
    const char *name;
    const tensor_spec *pspec, *bspec;
    int ntensors, nbuffers;
    tensor_desc tensors[MAX_TENSORS], buffers[MAX_BUFFERS];
    size_t nparams, nbufs;
    float *params, *grads, *bufs, *col;
    float *logits, *logp, *dlogits; /* [capacity][10] */
    float *loss;                    /* [capacity] */
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

static void net_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    net_acts *a = &m->a.net;
    a->h1 = floats(m, 32 * N * 676);
    a->a2 = floats(m, 64 * N * 24 * 26); /* wide: rows of 26, 24 used */
    a->p2 = floats(m, 64 * N * 144);
    a->arg2 = model_mem(m, 64 * N * 144 * sizeof(int32_t));
    a->f = floats(m, N * 9216);
    a->mask1 = floats(m, N * 9216);
    a->h3 = floats(m, N * 128);
    a->mask2 = floats(m, N * 128);
    a->dh3 = floats(m, N * 128);
    a->df = floats(m, N * 9216);
    a->dp = floats(m, 64 * N * 144);
    a->dh1 = floats(m, 32 * N * 676);
    size_t s1 = conv_scratch(1, 28, 28, 3, 0, m->chunk, 0), s2 = conv_scratch(32, 26, 26, 3, 0, m->chunk, 1);
    m->col = floats(m, s1 > s2 ? s1 : s2);
}

static void convnet_alloc(model *m)
{
    size_t N = (size_t)m->capacity;
    convnet_acts *a = &m->a.cnn;
    a->a1 = floats(m, 16 * N * 784);
    a->b1 = floats(m, 16 * N * 784);
    a->p1 = floats(m, 16 * N * 196);
    a->arg1 = model_mem(m, 16 * N * 196 * sizeof(int32_t));
    a->a2 = floats(m, 32 * N * 196);
    a->b2 = floats(m, 32 * N * 196);
    a->p2 = floats(m, 32 * N * 49);
    a->arg2 = model_mem(m, 32 * N * 49 * sizeof(int32_t));
    a->f = floats(m, N * 1568);
    a->df = floats(m, N * 1568);
    a->dp2 = floats(m, 32 * N * 49);
    a->dp1 = floats(m, 16 * N * 196);
    a->mean1 = floats(m, 16);
    a->invstd1 = floats(m, 16);
    a->mean2 = floats(m, 32);
    a->invstd2 = floats(m, 32);
    size_t s1 = conv_scratch(1, 28, 28, 5, 2, m->chunk, 0), s2 = conv_scratch(16, 14, 14, 5, 2, m->chunk, 0);
    m->col = floats(m, s1 > s2 ? s1 : s2);
}

model *model_create(const char *name, int capacity)
{
    return model_create_on(&nn_cpu, name, capacity);
}

model *model_create_on(const nn_backend *be, const char *name, int capacity)
{
    int kind;
    if (strcmp(name, "net") == 0)
        kind = NET;
    else if (strcmp(name, "convnet") == 0)
        kind = CONVNET;
    else
        return NULL;
    if (capacity < 1)
        die(EX_SOFTWARE, "model capacity must be positive, not %d", capacity);
    model *m = xcalloc(1, sizeof *m);
    m->be = be;
    m->kind = kind;
    m->name = kind == NET ? "net" : "convnet";
    m->capacity = capacity;
    m->chunk = capacity < be->chunk ? capacity : be->chunk;
    m->pspec = kind == NET ? net_params : convnet_params;
    m->ntensors = kind == NET ? (int)(sizeof net_params / sizeof *net_params)
                              : (int)(sizeof convnet_params / sizeof *convnet_params);
    m->bspec = kind == NET ? NULL : convnet_buffers;
    m->nbuffers = kind == NET ? 0 : (int)(sizeof convnet_buffers / sizeof *convnet_buffers);
    m->nparams = describe(m->pspec, m->ntensors, m->tensors);
    m->nbufs = describe(m->bspec, m->nbuffers, m->buffers);
    m->params = floats(m, m->nparams);
    m->grads = floats(m, m->nparams);
    m->bufs = floats(m, m->nbufs);
    be->zero(m->grads, m->nparams * sizeof(float));
    m->logits = floats(m, (size_t)capacity * CLASSES);
    m->logp = floats(m, (size_t)capacity * CLASSES);
    m->dlogits = floats(m, (size_t)capacity * CLASSES);
    m->loss = floats(m, (size_t)capacity);
    if (kind == NET)
        net_alloc(m);
    else
        convnet_alloc(m);
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

const char *model_name(const model *m) { return m->name; }
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
        if (spec[i].fan_in > 0)
            init_uniform(p, desc[i].count, rng_key(seed, (uint64_t)i), 1.0f / sqrtf((float)spec[i].fan_in));
        else
            for (size_t j = 0; j < desc[i].count; j++)
                p[j] = spec[i].value;
    }
}

void model_init_params(model *m, uint64_t seed)
{
    float *p = xmalloc(m->nparams * sizeof *p), *b = xmalloc((m->nbufs + 1) * sizeof *b);
    init_tensors(m->pspec, m->tensors, m->ntensors, p, seed);
    init_tensors(m->bspec, m->buffers, m->nbuffers, b, seed);
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

void model_normalize(const uint8_t *images, size_t count, float *x)
{
    normalize_images(images, count, x);
}

/* Parameter tensors first .. last are final: hand their range to the hook. */
static void grads_ready(model *m, int first, int last)
{
    if (m->hook) {
        size_t off = m->tensors[first].offset;
        m->hook(m->hook_ctx, off, m->tensors[last].offset + m->tensors[last].count - off);
    }
}

#define W(i) (m->params + m->tensors[i].offset)
#define G(i) (m->grads + m->tensors[i].offset)
#define B(i) (m->bufs + m->buffers[i].offset)

/* net: conv1 -> ReLU -> conv2 -> ReLU -> max-pool -> dropout(.25) -> fc1 -> ReLU -> dropout(.5) -> fc2.
 * conv2's bias and ReLU run after the pool, on a quarter of the values: max(x) + b = max(x + b),
 * and max and ReLU commute (gradients agree too: the argmax is the same). conv2 uses the wide
 * layout (rows of 26, 24 used); the pool reads only the used columns and its backward zeroes the
 * rest, as conv_backward requires. */
static void net_forward(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    size_t N = (size_t)n;
    conv_forward(be, x, W(0), NULL, a->h1, n, 1, 28, 28, 32, 3, 0, m->col, m->chunk, 0);
    be->bias_relu_forward(a->h1, W(1), 32, N * 676);
    conv_forward(be, a->h1, W(2), NULL, a->a2, n, 32, 26, 26, 64, 3, 0, m->col, m->chunk, 1);
    be->maxpool2_forward(a->a2, a->p2, a->arg2, 64 * n, 24, 24, 26);
    be->bias_relu_forward(a->p2, W(3), 64, N * 144);
    be->flatten_cnhw(a->p2, a->f, 64, n, 144);
    if (train)
        be->dropout_forward(a->f, a->mask1, n, 9216, ids, key, 0, 0.25f);
    linear_forward(be, a->f, W(4), W(5), a->h3, n, 9216, 128);
    be->relu_forward(a->h3, N * 128);
    if (train)
        be->dropout_forward(a->h3, a->mask2, n, 128, ids, key, 1, 0.5f);
    linear_forward(be, a->h3, W(6), W(7), m->logits, n, 128, CLASSES);
}

static void net_backward(model *m, const float *x, int n)
{
    const nn_backend *be = m->be;
    net_acts *a = &m->a.net;
    size_t N = (size_t)n;
    linear_backward(be, a->h3, W(6), m->dlogits, G(6), G(7), a->dh3, n, 128, CLASSES);
    grads_ready(m, 6, 7);
    be->dropout_backward(a->dh3, a->mask2, N * 128);
    be->relu_backward(a->dh3, a->h3, N * 128); /* h3 after dropout: positive exactly where kept and active */
    linear_backward(be, a->f, W(4), a->dh3, G(4), G(5), a->df, n, 9216, 128);
    grads_ready(m, 4, 5);
    be->dropout_backward(a->df, a->mask1, N * 9216);
    be->unflatten_cnhw(a->df, a->dp, 64, n, 144);
    be->relu_backward(a->dp, a->p2, 64 * N * 144);
    be->maxpool2_backward(a->dp, a->arg2, a->a2, 64 * n, 24, 24, 26); /* conv2's output gradient replaces a2 */
    conv_backward(be, a->h1, W(2), a->a2, G(2), G(3), a->dh1, n, 32, 26, 26, 64, 3, 0, m->col, m->chunk, 1);
    grads_ready(m, 2, 3);
    be->relu_backward(a->dh1, a->h1, 32 * N * 676);
    conv_backward(be, x, W(0), a->dh1, G(0), G(1), NULL, n, 1, 28, 28, 32, 3, 0, m->col, m->chunk, 0);
    grads_ready(m, 0, 1);
}

/* convnet: [conv 5x5 pad 2 -> BatchNorm -> ReLU -> max-pool] x 2 -> fc. ReLU after the pool as in net. */
static void convnet_forward(model *m, const float *x, int n, int train)
{
    const nn_backend *be = m->be;
    convnet_acts *a = &m->a.cnn;
    size_t N = (size_t)n;
    conv_forward(be, x, W(0), W(1), a->a1, n, 1, 28, 28, 16, 5, 2, m->col, m->chunk, 0);
    if (train) {
        be->batchnorm_forward_train(a->a1, W(2), W(3), a->b1, a->mean1, a->invstd1, B(0), B(1), B(2), 16,
                                       N * 784, BN_MOMENTUM, BN_EPS);
    } else {
        be->batchnorm_forward_eval(a->a1, W(2), W(3), B(0), B(1), a->b1, 16, N * 784, BN_EPS);
    }
    be->maxpool2_forward(a->b1, a->p1, a->arg1, 16 * n, 28, 28, 28);
    be->relu_forward(a->p1, 16 * N * 196);
    conv_forward(be, a->p1, W(4), W(5), a->a2, n, 16, 14, 14, 32, 5, 2, m->col, m->chunk, 0);
    if (train) {
        be->batchnorm_forward_train(a->a2, W(6), W(7), a->b2, a->mean2, a->invstd2, B(3), B(4), B(5), 32,
                                       N * 196, BN_MOMENTUM, BN_EPS);
    } else {
        be->batchnorm_forward_eval(a->a2, W(6), W(7), B(3), B(4), a->b2, 32, N * 196, BN_EPS);
    }
    be->maxpool2_forward(a->b2, a->p2, a->arg2, 32 * n, 14, 14, 14);
    be->relu_forward(a->p2, 32 * N * 49);
    be->flatten_cnhw(a->p2, a->f, 32, n, 49);
    linear_forward(be, a->f, W(8), W(9), m->logits, n, 1568, CLASSES);
}

static void convnet_backward(model *m, const float *x, int n)
{
    const nn_backend *be = m->be;
    convnet_acts *a = &m->a.cnn;
    size_t N = (size_t)n;
    linear_backward(be, a->f, W(8), m->dlogits, G(8), G(9), a->df, n, 1568, CLASSES);
    grads_ready(m, 8, 9);
    be->unflatten_cnhw(a->df, a->dp2, 32, n, 49);
    be->relu_backward(a->dp2, a->p2, 32 * N * 49);
    /* Gradients w.r.t. the BatchNorm outputs, then (in place) inputs, replace b2 and b1. */
    be->maxpool2_backward(a->dp2, a->arg2, a->b2, 32 * n, 14, 14, 14);
    be->batchnorm_backward(a->a2, a->b2, W(6), a->mean2, a->invstd2, a->b2, G(6), G(7), 32, N * 196);
    grads_ready(m, 6, 7);
    conv_backward(be, a->p1, W(4), a->b2, G(4), G(5), a->dp1, n, 16, 14, 14, 32, 5, 2, m->col, m->chunk, 0);
    grads_ready(m, 4, 5);
    be->relu_backward(a->dp1, a->p1, 16 * N * 196);
    be->maxpool2_backward(a->dp1, a->arg1, a->b1, 16 * n, 28, 28, 28);
    be->batchnorm_backward(a->a1, a->b1, W(2), a->mean1, a->invstd1, a->b1, G(2), G(3), 16, N * 784);
    grads_ready(m, 2, 3);
    conv_backward(be, x, W(0), a->b1, G(0), G(1), NULL, n, 1, 28, 28, 16, 5, 2, m->col, m->chunk, 0);
    grads_ready(m, 0, 1);
}

/* Labels are not checked here (they may live on the GPU): the shard reader rejects any above 9. */
static void check_batch(const model *m, int n)
{
    if (n < 0 || n > m->capacity)
        die(EX_SOFTWARE, "batch of %d samples for a model of capacity %d", n, m->capacity);
}

double model_forward_backward(model *m, const float *x, const uint8_t *labels, const uint64_t *ids, int n,
                              uint64_t dropout_key, float grad_scale)
{
    const nn_backend *be = m->be;
    check_batch(m, n);
    if (n == 0) {
        /* Every layer's parameters are a (weight, bias) pair, released back to front as in backward. */
        for (int i = m->ntensors - 2; i >= 0; i -= 2)
            grads_ready(m, i, i + 1);
        return 0.0;
    }
    if (m->kind == NET)
        net_forward(m, x, n, ids, dropout_key, 1);
    else
        convnet_forward(m, x, n, 1);
    be->log_softmax_nll_forward(m->logits, labels, m->logp, m->loss, n, CLASSES);
    be->log_softmax_nll_backward(m->logp, labels, m->dlogits, n, CLASSES, grad_scale);
    if (m->kind == NET)
        net_backward(m, x, n);
    else
        convnet_backward(m, x, n);
    return be->sum_losses(m->loss, n); /* after backward is queued: a GPU waits here, not mid-pass */
}

double model_evaluate(model *m, const float *x, const uint8_t *labels, int n, long *correct)
{
    const nn_backend *be = m->be;
    check_batch(m, n);
    if (n == 0)
        return 0.0;
    if (m->kind == NET)
        net_forward(m, x, n, NULL, 0, 0);
    else
        convnet_forward(m, x, n, 0);
    be->log_softmax_nll_forward(m->logits, labels, m->logp, m->loss, n, CLASSES);
    *correct += be->count_correct(m->logp, labels, n, CLASSES);
    return be->sum_losses(m->loss, n);
}
