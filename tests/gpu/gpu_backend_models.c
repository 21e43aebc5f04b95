/* gpu_backend, (b) and (c): the whole models on both backends (see gpu_backend.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "gpu_backend.h"
#include "nn/model.h"
#include "nn/optim.h"

/* ---- (b) whole models --------------------------------------------------------------------------- */

/* Each tensor of a flat buffer (parameters or buffers) compared on its own, on its own scale but at
 * least 5% of the whole buffer's (same metric): a tensor whose true gradient is 0 (the bias of a
 * convolution followed by BatchNorm, which cancels it) holds rounding noise on both devices, and noise
 * relative to noise means nothing (measured: up to 3e-5 of a 1% floor). The other tensors of both
 * models sit at 7% of their buffer's largest or above. params (NULL: none): parameter updates, whose two sides
 * each round their new parameters to float, so they may differ by 1 ulp of the parameter plus the
 * difference of the updates themselves: 2 ulp of the tensor's largest parameter of slack. */
static void compare_tensors(const char *prefix, const model *m, int buffers, const float *ref, const float *got,
                            const float *params, const tolerances *t)
{
    int count = buffers ? model_num_buffers(m) : model_num_tensors(m);
    size_t total = buffers ? model_buffer_size(m) : model_num_params(m);
    double least = 0.0;
    for (size_t i = 0; i < total; i++) {
        double v = fabs((double)ref[i]);
        least = t->reduced ? least + v * v : v > least ? v : least;
    }
    least = 5e-2 * (t->reduced ? sqrt(least / (double)(total ? total : 1)) : least);
    for (int i = 0; i < count; i++) {
        const tensor_desc *d = buffers ? model_buffer(m, i) : model_tensor(m, i);
        char what[128];
        snprintf(what, sizeof what, "%s %s", prefix, d->name);
        int exact = buffers && strstr(d->name, "num_batches_tracked") != NULL;
        float pmax = 0.0f;
        for (size_t j = 0; params && j < d->count; j++)
            pmax = fabsf(params[d->offset + j]) > pmax ? fabsf(params[d->offset + j]) : pmax;
        double slack = params ? 2.0 * ((double)nextafterf(pmax, INFINITY) - (double)pmax) : 0.0;
        compare_metric(what, ref + d->offset, got + d->offset, d->count, exact ? TOL_EXACT : t->model, least, slack,
                       t->reduced);
    }
}

/* After the models' forward + backward: one optimizer step each (net: Adadelta as its recipe, convnet:
 * SGD with momentum and weight decay), the updates compared (after - before: the parameters start
 * identical), then an eval-mode pass on the batch x, y (BatchNorm from its running statistics, no
 * dropout). */
static void test_step_and_evaluate(const char *name, model *m[2], const twin *x, const twin *y, int n,
                                   const tolerances *t)
{
    char what[128];
    size_t np = model_num_params(m[0]);
    int convnet = strcmp(name, "convnet") == 0;
    optim_cfg cfg = convnet ? (optim_cfg){.kind = OPTIM_SGD, .momentum = 0.9f, .weight_decay = 1e-4f}
                            : (optim_cfg){.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f};
    float lr = convnet ? 0.01f : 1.0f;
    float *before = xmalloc(np * sizeof *before), *upd[2];
    model_download(m[0], before, NULL);
    for (int s = 0; s < 2; s++) {
        optim *o = optim_create_on(bk[s], &cfg, np);
        optim_step(o, model_params(m[s]), model_grads(m[s]), lr);
        upd[s] = xmalloc(np * sizeof *upd[s]);
        model_download(m[s], upd[s], NULL);
        for (size_t i = 0; i < np; i++)
            upd[s][i] -= before[i];
        optim_free(o);
    }
    snprintf(what, sizeof what, "%s [%s] %s update", name, t->precision, convnet ? "sgd" : "adadelta");
    compare_tensors(what, m[0], 0, upd[0], upd[1], before, t);

    /* A near-tie of two logits may resolve differently: one prediction of slack. */
    long correct[2] = {0, 0};
    double eloss[2];
    BOTH(eloss[s_] = model_evaluate(m[s_], P(*x), P(*y), n, &correct[s_]));
    snprintf(what, sizeof what, "%s [%s] evaluate: loss", name, t->precision);
    check_scalar(what, eloss[0], eloss[1], t->model);
    int ok = labs(correct[0] - correct[1]) <= 1;
    snprintf(what, sizeof what, "%s [%s] evaluate: correct", name, t->precision);
    printf("%-4s %-46s cpu %ld, cuda %ld of %d (at most 1 apart)\n", ok ? "ok" : "FAIL", what, correct[0], correct[1],
           n);
    failures += !ok;
    free(before), free(upd[0]), free(upd[1]);
}

/* Parameters rounded to 4 significant bits of their tensor's largest magnitude (a power-of-two step). */
static void quantize_params(float *p, const model *m)
{
    for (int i = 0; i < model_num_tensors(m); i++) {
        const tensor_desc *d = model_tensor(m, i);
        float big = 0.0f;
        for (size_t j = 0; j < d->count; j++)
            big = fabsf(p[d->offset + j]) > big ? fabsf(p[d->offset + j]) : big;
        if (big == 0.0f)
            continue;
        float step = ldexpf(1.0f, (int)ceilf(log2f(big)) - 4);
        for (size_t j = 0; j < d->count; j++)
            p[d->offset + j] = step * nearbyintf(p[d->offset + j] / step);
    }
}

/* The input and the parameters are coarse dyadic numbers (inputs multiples of 1/4 in [-0.5, 2.75], like
 * normalised MNIST; parameters with 4 significant bits), so every product and partial sum of the first
 * convolutions (net: both, before the dropout's 4/3; convnet: the first, before BatchNorm) is exact in
 * fp32 and their outputs are identical on both devices whatever order the GEMMs add in. Otherwise a
 * max-pool window holding two values 1e-7 apart picks the other one on the other device now and then
 * (1 draw in 12 with net at 64 samples, emulated), which moves one filter's weight gradient by up to 1%
 * of the largest and conv1's by 0.2%: near-ties, not errors, but no tolerance tells them apart. */
void test_model(const char *name, int n, const tolerances *t)
{
    const uint64_t seed = 42, dropout_key = 0x9e3779b97f4a7c15ULL;
    char what[128];
    model *m[2];
    for (int s = 0; s < 2; s++)
        m[s] = model_create_on(bk[s], model_kind_of(name), n);
    size_t np = model_num_params(m[0]), nb = model_buffer_size(m[0]);
    model_init_params(m[0], seed);
    float *init = xmalloc(np * sizeof *init);
    model_download(m[0], init, NULL);
    quantize_params(init, m[0]);
    for (int s = 0; s < 2; s++)
        model_upload(m[s], init, NULL); /* BatchNorm buffers: as model_create_on set them, on both */
    free(init);

    /* The batch, its labels and (arbitrary) global sample ids (the dropout masks' input). */
    float *hx = rnd_levels((size_t)n * 784, 14);
    for (size_t i = 0; i < (size_t)n * 784; i++)
        hx[i] = (hx[i] - 1.0f) * 0.25f; /* rnd_levels: -1 .. 12 */
    uint8_t *lab = rnd_bytes((size_t)n, 10);
    uint64_t *ids = rnd_u64((size_t)n, 60000);
    twin x = twin_new(hx, (size_t)n * 784 * sizeof *hx), y = twin_new(lab, (size_t)n);
    twin tids = twin_new(ids, (size_t)n * sizeof *ids);

    double loss[2];
    BOTH(loss[s_] = model_forward_backward(m[s_], P(x), P(y), P(tids), n, dropout_key, 1.0f / (float)n));
    snprintf(what, sizeof what, "%s [%s] loss (%d samples)", name, t->precision, n);
    check_scalar(what, loss[0], loss[1], t->loss);

    float *ref = xmalloc(np * sizeof *ref), *got = xmalloc(np * sizeof *got);
    bk[0]->download(ref, model_grads(m[0]), np * sizeof *ref);
    bk[1]->download(got, model_grads(m[1]), np * sizeof *got);
    snprintf(what, sizeof what, "%s [%s] grad", name, t->precision);
    compare_tensors(what, m[0], 0, ref, got, NULL, t);
    if (nb) {
        float *rb = xmalloc(nb * sizeof *rb), *gb = xmalloc(nb * sizeof *gb);
        model_download(m[0], NULL, rb);
        model_download(m[1], NULL, gb);
        snprintf(what, sizeof what, "%s [%s] buffer", name, t->precision);
        compare_tensors(what, m[0], 1, rb, gb, NULL, t);
        free(rb), free(gb);
    }

    if (!t->reduced)
        test_step_and_evaluate(name, m, &x, &y, n, t);
    twin_free(&tids), twin_free(&x), twin_free(&y);
    free(hx), free(lab), free(ids), free(ref), free(got);
    for (int s = 0; s < 2; s++)
        model_free(m[s]);
}
