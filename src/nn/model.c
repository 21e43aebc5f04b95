#include "nn/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/profile.h"
#include "base/rng.h"
#include "nn/model_parts.h"
#include "nn/layers.h"
#include "nn/ops.h"

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
    m->params = model_floats(m, m->nparams);
    m->grads = model_floats(m, m->nparams);
    m->bufs = model_floats(m, m->nbufs);
    bind_tensors(m);
    be->zero(m->grads, m->nparams * sizeof(float));
    m->logits = model_floats(m, (size_t)capacity * CLASSES);
    m->logp = model_floats(m, (size_t)capacity * CLASSES);
    m->dlogits = model_floats(m, (size_t)capacity * CLASSES);
    m->loss = model_floats(m, (size_t)capacity);
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
size_t model_backend_bytes(const model *m) { return m->mem_bytes; }
int model_num_tensors(const model *m) { return m->ntensors; }
size_t model_num_params(const model *m) { return m->nparams; }
float *model_params(model *m) { return m->params; }
float *model_grads(model *m) { return m->grads; }

void model_place_grads(model *m, float *grads)
{
    for (int i = 0; i < m->nmem; i++)
        if (m->mem[i] == m->grads) { /* the last entry takes the freed slot: model_free needs no order */
            m->be->free(m->mem[i]);
            m->mem[i] = m->mem[--m->nmem];
            m->mem_bytes -= m->nparams * sizeof(float);
            break;
        }
    m->grads = grads;
    bind_tensors(m);
    m->be->zero(m->grads, m->nparams * sizeof(float));
}
int model_num_buffers(const model *m) { return m->nbuffers; }
size_t model_buffer_size(const model *m) { return m->nbufs; }
float *model_buffers(model *m) { return m->bufs; }

const tensor_desc *model_tensor(const model *m, int i) { return i >= 0 && i < m->ntensors ? &m->tensors[i] : NULL; }

const tensor_desc *model_buffer(const model *m, int i) { return i >= 0 && i < m->nbuffers ? &m->buffers[i] : NULL; }

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

void model_set_poll_hook(model *m, grad_poll_fn fn, void *ctx)
{
    m->poll = fn;
    m->poll_ctx = ctx;
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
    if (!m->arch->head || !m->arch->head(m, labels, ids, dropout_key, n, grad_scale)) {
        be->log_softmax_nll_forward(m->logits, labels, m->logp, m->loss, n, CLASSES);
        /* Before backward, so the gradient all-reduce can start the moment backward's last hook returns. */
        be->add_losses(m->loss, n, &m->loss_sum[0]);
        be->log_softmax_nll_backward(m->logp, labels, m->dlogits, n, CLASSES, grad_scale);
        profile_lap("loss");
    }
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
