#include "optim.h"

#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "layers.h"
#include "ops.h"

struct optim {
    optim_cfg cfg;
    size_t n, nstate;
    float *state;
};

optim *optim_create(const optim_cfg *cfg, size_t n)
{
    if (cfg->kind != OPTIM_ADADELTA && cfg->kind != OPTIM_SGD)
        die(EX_SOFTWARE, "unknown optimizer kind %d", (int)cfg->kind);
    optim *o = xcalloc(1, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->nstate = cfg->kind == OPTIM_ADADELTA ? 2 * n : cfg->momentum != 0.0f ? n : 0;
    o->state = nn_alloc(o->nstate * sizeof(float));
    memset(o->state, 0, o->nstate * sizeof(float));
    return o;
}

void optim_step(optim *o, float *params, const float *grads, float lr)
{
    const optim_cfg *c = &o->cfg;
    if (c->kind == OPTIM_ADADELTA) {
        float *square_avg = o->state, *acc_delta = o->state + o->n;
        SIMD /* vector square roots need -fno-math-errno too */
        for (size_t i = 0; i < o->n; i++)
            op_adadelta(params, grads, square_avg, acc_delta, i, lr, c->rho, c->eps, c->weight_decay);
    } else {
        SIMD
        for (size_t i = 0; i < o->n; i++)
            op_sgd(params, grads, o->state, i, lr, c->momentum, c->weight_decay);
    }
}

float *optim_state(optim *o, size_t *count)
{
    *count = o->nstate;
    return o->state;
}

void optim_free(optim *o)
{
    if (!o)
        return;
    nn_free(o->state);
    free(o);
}
