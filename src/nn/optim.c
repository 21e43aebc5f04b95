#include "nn/optim.h"

#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

const char *const optim_kind_names[] = {"adadelta", "sgd", NULL};

struct optim {
    optim_cfg cfg;
    const nn_backend *be;
    size_t n, nstate;
    float *state;
};

optim *optim_create_on(const nn_backend *be, const optim_cfg *cfg, size_t n)
{
    if (cfg->kind != OPTIM_ADADELTA && cfg->kind != OPTIM_SGD)
        die(EX_SOFTWARE, "unknown optimizer kind %d", (int)cfg->kind);
    optim *o = xcalloc(1, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    o->nstate = cfg->kind == OPTIM_ADADELTA ? 2 * n : cfg->momentum != 0.0f ? n : 0;
    o->state = be->alloc(o->nstate * sizeof(float));
    be->zero(o->state, o->nstate * sizeof(float));
    return o;
}

static void step(optim *o, float *params, const float *grads, float lr, float *clear)
{
    const optim_cfg *c = &o->cfg;
    if (c->kind == OPTIM_ADADELTA)
        o->be->adadelta_step(params, grads, o->state, o->state + o->n, o->n, lr, c->rho, c->eps, c->weight_decay,
                             clear);
    else
        o->be->sgd_step(params, grads, o->state, o->n, lr, c->momentum, c->weight_decay, clear);
}

void optim_step(optim *o, float *params, const float *grads, float lr) { step(o, params, grads, lr, NULL); }

void optim_step_clear(optim *o, float *params, float *grads, float lr) { step(o, params, grads, lr, grads); }

float *optim_state(optim *o, size_t *count)
{
    *count = o->nstate;
    return o->state;
}

int optim_state_parts(const optim *o, const char *const **names)
{
    static const char *const adadelta[] = {"square_avg", "acc_delta"}, *const sgd[] = {"momentum_buffer"};
    *names = o->cfg.kind == OPTIM_ADADELTA ? adadelta : sgd;
    return o->n ? (int)(o->nstate / o->n) : 0;
}

void optim_free(optim *o)
{
    if (!o)
        return;
    o->be->free(o->state);
    free(o);
}
