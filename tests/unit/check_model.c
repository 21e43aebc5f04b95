/* The model API the trainer relies on: tensor tables and the flat layout, init, gradient hooks,
 * accumulation, batch-split and order invariance, evaluation, normalisation, capacity. */
#include "../check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "nn/cpu/nn_cpu.h"
#include "base/rng.h"
#include "model_testutil.h"

enum { NB = 6 };

typedef struct {
    float x[NB * 784];
    uint8_t labels[NB];
    uint64_t ids[NB];
} batch;

static void make_batch(batch *b, uint64_t seed) { random_batch(seed, NB, b->x, b->labels, b->ids); }

static float max_abs(const float *a, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(a[i]));
    return m;
}

/* |a - b| <= tol * max|b| elementwise: float sums in another order (GEMM blocking, batch split). */
static void assert_close(const char *what, const float *a, const float *b, size_t n, float tol)
{
    float scale = max_abs(b, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= tol * scale, "%s[%zu]: %.9g vs %.9g", what, i, (double)a[i], (double)b[i]);
}

static const char *const models[2] = {"net", "convnet"};

START_TEST(test_tables)
{
    static const struct {
        const char *name;
        int ndim, shape[4];
    } net[] = {{"conv1.weight", 4, {32, 1, 3, 3}},  {"conv1.bias", 1, {32}},
               {"conv2.weight", 4, {64, 32, 3, 3}}, {"conv2.bias", 1, {64}},
               {"fc1.weight", 2, {128, 9216}},      {"fc1.bias", 1, {128}},
               {"fc2.weight", 2, {10, 128}},        {"fc2.bias", 1, {10}}},
      cnn[] = {{"layer1.0.weight", 4, {16, 1, 5, 5}},  {"layer1.0.bias", 1, {16}},
               {"layer1.1.weight", 1, {16}},           {"layer1.1.bias", 1, {16}},
               {"layer2.0.weight", 4, {32, 16, 5, 5}}, {"layer2.0.bias", 1, {32}},
               {"layer2.1.weight", 1, {32}},           {"layer2.1.bias", 1, {32}},
               {"fc.weight", 2, {10, 1568}},           {"fc.bias", 1, {10}}},
      bufs[] = {{"layer1.1.running_mean", 1, {16}},       {"layer1.1.running_var", 1, {16}},
                {"layer1.1.num_batches_tracked", 0, {0}}, {"layer2.1.running_mean", 1, {32}},
                {"layer2.1.running_var", 1, {32}},        {"layer2.1.num_batches_tracked", 0, {0}}};
    ck_assert_ptr_null(model_create_on(&nn_cpu, model_kind_of("resnet"), 4));
    for (int k = 0; k < 2; k++) {
        model *m = model_create_on(&nn_cpu, model_kind_of(models[k]), 5);
        ck_assert_str_eq(model_name(m), models[k]);
        ck_assert_int_eq(model_capacity(m), 5);
        int nt = k ? 10 : 8;
        ck_assert_int_eq(model_num_tensors(m), nt);
        size_t off = 0;
        for (int i = 0; i < nt; i++) {
            const tensor_desc *d = model_tensor(m, i);
            ck_assert_str_eq(d->name, k ? cnn[i].name : net[i].name);
            ck_assert_int_eq(d->ndim, k ? cnn[i].ndim : net[i].ndim);
            size_t count = 1;
            for (int j = 0; j < d->ndim; j++) {
                ck_assert_int_eq(d->shape[j], k ? cnn[i].shape[j] : net[i].shape[j]);
                count *= (size_t)d->shape[j];
            }
            ck_assert_uint_eq(d->count, count);
            ck_assert_uint_eq(d->offset, off); /* back to back, state_dict order */
            off += count;
        }
        ck_assert_ptr_null(model_tensor(m, nt));
        ck_assert_ptr_null(model_tensor(m, -1));
        ck_assert_uint_eq(model_num_params(m), k ? 29034 : 1199882);
        ck_assert_uint_eq(off, model_num_params(m));
        ck_assert_int_eq(model_num_buffers(m), k ? 6 : 0);
        off = 0;
        for (int i = 0; i < model_num_buffers(m); i++) {
            const tensor_desc *d = model_buffer(m, i);
            ck_assert_str_eq(d->name, bufs[i].name);
            ck_assert_int_eq(d->ndim, bufs[i].ndim);
            ck_assert_uint_eq(d->offset, off);
            off += d->count;
        }
        ck_assert_uint_eq(model_buffer_size(m), k ? 98 : 0);
        model_free(m);
    }
}
END_TEST

/* Tensor t, element j: (2 rng_uniform(rng_key(seed, t), j) - 1) / sqrt(fan_in); BatchNorm 1/0. */
START_TEST(test_init)
{
    model *m = model_create_on(&nn_cpu, MODEL_CONVNET, 2);
    float *p = model_params(m), *b = model_buffers(m);
    const int fan_in[10] = {25, 25, 0, 0, 400, 400, 0, 0, 1568, 1568};
    b[0] = 5.0f;
    model_init_params(m, 42);
    for (int t = 0; t < 10; t++) {
        const tensor_desc *d = model_tensor(m, t);
        for (size_t j = 0; j < d->count; j++) {
            float want =
                fan_in[t] ? (2.0f * rng_uniform(rng_key(42, (uint64_t)t), j) - 1.0f) * (1.0f / sqrtf((float)fan_in[t]))
                          : (t % 4 == 2 ? 1.0f : 0.0f);
            ck_assert_float_eq(p[d->offset + j], want);
        }
    }
    for (int i = 0; i < model_num_buffers(m); i++) { /* mean 0, var 1, count 0 */
        const tensor_desc *d = model_buffer(m, i);
        for (size_t j = 0; j < d->count; j++)
            ck_assert_float_eq(b[d->offset + j], i % 3 == 1 ? 1.0f : 0.0f);
    }
    float first = p[0];
    model_init_params(m, 43);
    ck_assert_float_ne(p[0], first);
    model_free(m);
}
END_TEST

typedef struct {
    model *m;
    int calls;
    size_t off[16], count[16];
    float *snap; /* the gradients as each range was reported */
} hook_log;

static void record(void *ctx, size_t offset, size_t count)
{
    hook_log *h = ctx;
    ck_assert_int_lt(h->calls, 16);
    h->off[h->calls] = offset;
    h->count[h->calls++] = count;
    memcpy(h->snap + offset, model_grads(h->m) + offset, count * sizeof(float));
}

/* Ranges come back to front, disjoint and covering all parameters, each final when reported; with
 * n = 0 the same ranges arrive and nothing is added. */
START_TEST(test_grad_hook)
{
    batch b;
    make_batch(&b, 3);
    model *m = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB);
    size_t np = model_num_params(m);
    hook_log h = {.m = m, .snap = calloc(np, sizeof(float))};
    model_set_grad_hook(m, record, &h);
    memset(model_grads(m), 0, np * sizeof(float));
    double loss = model_forward_backward(m, b.x, b.labels, b.ids, NB, 9, 1.0f / NB);
    ck_assert(loss > 0);
    ck_assert_int_ge(h.calls, model_num_tensors(m) / 2);
    size_t end = np;
    for (int c = 0; c < h.calls; c++) {
        ck_assert_uint_eq(h.off[c] + h.count[c], end);
        end = h.off[c];
    }
    ck_assert_uint_eq(end, 0);
    ck_assert_mem_eq(h.snap, model_grads(m), np * sizeof(float));
    int calls = h.calls;
    float *g = malloc(np * sizeof *g);
    memcpy(g, model_grads(m), np * sizeof *g);
    h.calls = 0;
    ck_assert(model_forward_backward(m, NULL, NULL, NULL, 0, 9, 1.0f) == 0.0);
    ck_assert_int_eq(h.calls, calls);
    ck_assert_mem_eq(g, model_grads(m), np * sizeof *g);
    free(g), free(h.snap);
    model_free(m);
}
END_TEST

/* Gradients are added to what is there, and scale with grad_scale. */
START_TEST(test_accumulate)
{
    batch b;
    make_batch(&b, 4);
    model *m = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB);
    size_t np = model_num_params(m);
    float *g1 = malloc(np * sizeof *g1), *twice = malloc(np * sizeof *twice);
    memset(model_grads(m), 0, np * sizeof(float));
    double l1 = model_forward_backward(m, b.x, b.labels, b.ids, NB, 9, 0.5f);
    memcpy(g1, model_grads(m), np * sizeof *g1);
    double l2 = model_forward_backward(m, b.x, b.labels, b.ids, NB, 9, 1.5f);
    ck_assert_double_eq(l1, l2);
    for (size_t i = 0; i < np; i++)
        twice[i] = 4.0f * g1[i]; /* 0.5 + 1.5 = 4 x 0.5 */
    assert_close("accumulated", model_grads(m), twice, np, 1e-6f);
    free(g1), free(twice);
    model_free(m);
}
END_TEST

/* Reordering the samples (with their ids) changes nothing; for net (no batch statistics) a batch
 * split into two calls gives the same loss and gradients: dropout masks follow the sample ids.
 * Tolerance: float sums in another order, 1e-5 of the largest gradient. */
START_TEST(test_batch_invariance)
{
    batch b, r;
    make_batch(&b, 5);
    for (int i = 0; i < NB; i++) {
        memcpy(r.x + i * 784, b.x + (NB - 1 - i) * 784, 784 * sizeof(float));
        r.labels[i] = b.labels[NB - 1 - i];
        r.ids[i] = b.ids[NB - 1 - i];
    }
    model *m = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB);
    size_t np = model_num_params(m);
    float *g = malloc(np * sizeof *g);
    memset(model_grads(m), 0, np * sizeof(float));
    double loss = model_forward_backward(m, b.x, b.labels, b.ids, NB, 11, 1.0f);
    memcpy(g, model_grads(m), np * sizeof *g);
    memset(model_grads(m), 0, np * sizeof(float));
    double lr = model_forward_backward(m, r.x, r.labels, r.ids, NB, 11, 1.0f);
    ck_assert_double_eq_tol(lr, loss, 1e-5 * loss);
    assert_close("reversed batch", model_grads(m), g, np, 1e-5f);
    if (_i == 0) {
        memset(model_grads(m), 0, np * sizeof(float));
        double ls = model_forward_backward(m, b.x, b.labels, b.ids, 2, 11, 1.0f) +
                    model_forward_backward(m, b.x + 2 * 784, b.labels + 2, b.ids + 2, NB - 2, 11, 1.0f);
        ck_assert_double_eq_tol(ls, loss, 1e-5 * loss);
        assert_close("split batch", model_grads(m), g, np, 1e-5f);
        /* Another dropout key: another loss. */
        ck_assert(fabs(model_forward_backward(m, b.x, b.labels, b.ids, NB, 12, 1.0f) - loss) > 1e-3);
    }
    free(g);
    model_free(m);
}
END_TEST

/* Evaluation is per sample (no dropout, running statistics): sums add over a split, and it leaves
 * gradients and running statistics alone. A training pass updates the running statistics. */
START_TEST(test_evaluate)
{
    batch b;
    make_batch(&b, 6);
    model *m = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB);
    size_t np = model_num_params(m), nb = model_buffer_size(m);
    memset(model_grads(m), 0, np * sizeof(float));
    float *bufs = malloc((nb + 1) * sizeof *bufs);
    memcpy(bufs, model_buffers(m), nb * sizeof *bufs);
    long correct = 0, c1 = 0, c2 = 0;
    double loss = model_evaluate(m, b.x, b.labels, NB, &correct);
    ck_assert(loss > 0);
    ck_assert(correct >= 0 && correct <= NB);
    double l1 = model_evaluate(m, b.x, b.labels, 1, &c1);
    double l2 = model_evaluate(m, b.x + 784, b.labels + 1, NB - 1, &c2);
    ck_assert_double_eq_tol(l1 + l2, loss, 1e-5 * loss);
    ck_assert_int_eq(c1 + c2, correct);
    ck_assert_float_eq(max_abs(model_grads(m), np), 0.0f);
    ck_assert_mem_eq(bufs, model_buffers(m), nb * sizeof *bufs);
    if (_i == 1) {
        model_forward_backward(m, b.x, b.labels, b.ids, NB, 1, 1.0f);
        ck_assert_float_eq(model_buffers(m)[model_buffer(m, 2)->offset], 1.0f); /* num_batches_tracked */
        ck_assert(memcmp(bufs, model_buffers(m), nb * sizeof *bufs) != 0);
    }
    free(bufs);
    model_free(m);
}
END_TEST

START_TEST(test_normalize)
{
    const uint8_t v[3] = {0, 128, 255};
    float x[3];
    cpu_normalize(v, 3, x);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq_tol(x[i], (v[i] / 255.0 - 0.1307) / 0.3081, 1e-6);
}
END_TEST

/* More samples than the model's capacity is a programming error. */
START_TEST(test_capacity)
{
    batch b;
    make_batch(&b, 7);
    model *m = model_create_on(&nn_cpu, MODEL_NET, 2);
    model_forward_backward(m, b.x, b.labels, b.ids, 3, 1, 1.0f);
}
END_TEST

/* keep_col: with one chunk for the batch, conv2's backward (the first of backward) reuses the im2col its
 * forward (the last of forward) left in the shared buffer; conv1's is redone, conv2's forward having
 * overwritten it. Both backends here are nn_cpu with whole-batch chunks and a counting im2col, one
 * keeping: the same operations but one im2col, so the same gradients bit for bit and one call fewer.
 * With chunks of 2 samples (6 in the batch) nothing is kept: 3 im2col calls per convolution and pass. */
static int im2col_calls;

static void counting_im2col(const float *x, float *col, int N, int C, int H, int W, int k, int pad, int n0, int ns,
                            int wide)
{
    im2col_calls++;
    nn_cpu.im2col(x, col, N, C, H, W, k, pad, n0, ns, wide);
}

START_TEST(test_keep_col)
{
    batch b, e;
    make_batch(&b, 9);
    make_batch(&e, 10);
    static const int chunk[4] = {1 << 30, 1 << 30, 2, 2}, expect[4] = {4, 3, 12, 12};
    float *g[4];
    size_t np = 0;
    ck_assert_int_eq(nn_cpu.keep_col, 0); /* the CPU backend (chunk 1) is unchanged */
    for (int t = 0; t < 4; t++) {
        nn_backend be = nn_cpu;
        be.chunk = chunk[t];
        be.keep_col = t % 2;
        be.im2col = counting_im2col;
        be.conv_forward = NULL; /* layers.c's composition on any thread count (conv_cpu.h shares conv1 otherwise) */
        be.conv_backward = NULL;
        model *m = model_create_on(&be, model_kind_of(models[_i]), NB);
        np = model_num_params(m);
        long correct = 0;
        model_evaluate(m, e.x, e.labels, NB - 1, &correct); /* another batch's im2col left in the buffer */
        memset(model_grads(m), 0, np * sizeof(float));
        im2col_calls = 0;
        model_forward_backward(m, b.x, b.labels, b.ids, NB, 3, 1.0f);
        ck_assert_msg(im2col_calls == expect[t], "chunk %d keep_col %d: %d im2col calls, expected %d", chunk[t], t % 2,
                      im2col_calls, expect[t]);
        g[t] = malloc(np * sizeof(float));
        memcpy(g[t], model_grads(m), np * sizeof(float));
        model_free(m);
    }
    for (int t = 1; t < 4; t += 2)
        ck_assert_msg(memcmp(g[t - 1], g[t], np * sizeof(float)) == 0, "keep_col changes the gradients (chunk %d)",
                      chunk[t]);
    for (int t = 0; t < 4; t++)
        free(g[t]);
}
END_TEST

/* Gradients moved into the caller's buffer (the collectives' shared memory): zeroed there, the backend's
 * own copy released and its bytes no longer counted, and every layer's gradient written there, the same
 * bits as a model that kept its own. */
START_TEST(test_place_grads)
{
    batch b;
    make_batch(&b, 11);
    model *m = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB),
          *r = model_create_on(&nn_cpu, model_kind_of(models[_i]), NB);
    size_t np = model_num_params(m), before = model_backend_bytes(m);
    float *shared = malloc(np * sizeof *shared);
    for (size_t i = 0; i < np; i++)
        shared[i] = 7.0f;
    model_place_grads(m, shared);
    ck_assert_ptr_eq(model_grads(m), shared);
    ck_assert_float_eq(max_abs(shared, np), 0.0f);
    ck_assert_uint_eq(before - model_backend_bytes(m), np * sizeof(float));
    model_forward_backward(m, b.x, b.labels, b.ids, NB, 5, 1.0f);
    model_forward_backward(r, b.x, b.labels, b.ids, NB, 5, 1.0f);
    ck_assert(memcmp(shared, model_grads(r), np * sizeof(float)) == 0);
    model_free(m);
    model_free(r);
    free(shared);
}
END_TEST

/* The ends of each range the model checks: kinds, tensor and buffer indices, a batch of 0 and of exactly
 * its capacity (1), and the loss sum emptied by each take. */
START_TEST(test_limits)
{
    batch b;
    make_batch(&b, 12);
    ck_assert_ptr_null(model_create_on(&nn_cpu, MODEL_KINDS, 1));
    ck_assert_ptr_null(model_create_on(&nn_cpu, (model_kind)-1, 1));
    model *m = model_create_on(&nn_cpu, MODEL_CONVNET, 1);
    int nb = model_num_buffers(m);
    ck_assert_ptr_nonnull(model_buffer(m, nb - 1));
    ck_assert_ptr_null(model_buffer(m, nb));
    ck_assert_ptr_null(model_buffer(m, -1));
    long correct = 5;
    ck_assert_double_eq(model_evaluate(m, b.x, b.labels, 0, &correct), 0.0);
    ck_assert_int_eq(correct, 5);
    ck_assert(model_evaluate(m, b.x, b.labels, 1, &correct) > 0.0);
    ck_assert(model_forward_backward(m, b.x, b.labels, b.ids, 1, 1, 1.0f) > 0.0);
    ck_assert_double_eq(model_take_loss(m), 0.0);
    model_free(m);
}
END_TEST

/* A model of no capacity, and evaluation of more samples than the capacity or of a negative count:
 * programming errors, refused (EX_SOFTWARE). */
START_TEST(test_refused)
{
    batch b;
    make_batch(&b, 13);
    long correct = 0;
    if (_i == 0) { /* dies here, or the case ends with 0: nothing after it may die in its place */
        model_create_on(&nn_cpu, MODEL_NET, 0);
        return;
    }
    model *m = model_create_on(&nn_cpu, MODEL_NET, 2);
    model_evaluate(m, b.x, b.labels, _i == 1 ? 3 : -1, &correct);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tables);
    tcase_add_test(tc, test_init);
    tcase_add_loop_test(tc, test_grad_hook, 0, 2);
    tcase_add_loop_test(tc, test_accumulate, 0, 2);
    tcase_add_loop_test(tc, test_batch_invariance, 0, 2);
    tcase_add_loop_test(tc, test_evaluate, 0, 2);
    tcase_add_test(tc, test_normalize);
    tcase_add_loop_test(tc, test_keep_col, 0, 2);
    tcase_add_exit_test(tc, test_capacity, 70); /* EX_SOFTWARE */
    tcase_add_loop_test(tc, test_place_grads, 0, 2);
    tcase_add_test(tc, test_limits);
    tcase_add_loop_exit_test(tc, test_refused, 70, 0, 3);
    suite_add_tcase(s, tc);
    return check_run(s);
}
