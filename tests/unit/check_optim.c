/* Optimizers against torch.optim for three steps. Expected values: torch 1.13 in float64, e.g.
 *   p = torch.tensor([1., -2., .5, 0.], dtype=torch.float64, requires_grad=True)
 *   o = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1)
 *   for g in GRADS: p.grad = torch.tensor(g, dtype=torch.float64); o.step()
 * and checked by hand for the first steps (comments). The optimizer runs in float, so values match
 * to float rounding: |got - want| <= 1e-6 (1 + |want|), far below any semantic difference (eps
 * inside or outside a square root, momentum dampening, decay order all change digits at 1e-4). */
#include "../check_run.h"
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sysexits.h>

#include "nn/ops.h"
#include "nn/optim.h"

#define NP 4
static const float P0[NP] = {1.0f, -2.0f, 0.5f, 0.0f};
static const float GRADS[3][NP] = {{0.1f, -0.2f, 0.3f, 0.0f}, {-0.05f, 0.4f, 0.3f, 1.0f}, {0.2f, 0.0f, -0.1f, -1.0f}};

/* Also optim_step_clear (the trainer's): the same parameters, bit for bit, and the gradients zeroed. */
static void run(const optim_cfg *cfg, float lr, const double want[3][NP])
{
    float p[NP], pc[NP], g[NP];
    memcpy(p, P0, sizeof p);
    memcpy(pc, P0, sizeof pc);
    optim *o = optim_create_on(&nn_cpu, cfg, NP), *oc = optim_create_on(&nn_cpu, cfg, NP);
    for (int s = 0; s < 3; s++) {
        optim_step(o, p, GRADS[s], lr);
        for (int i = 0; i < NP; i++)
            ck_assert_msg(fabs(p[i] - want[s][i]) <= 1e-6 * (1.0 + fabs(want[s][i])),
                          "step %d param %d: %.9g, expected %.9g", s + 1, i, (double)p[i], want[s][i]);
        memcpy(g, GRADS[s], sizeof g);
        optim_step_clear(oc, pc, g, lr);
        ck_assert_mem_eq(pc, p, sizeof p);
        for (int i = 0; i < NP; i++)
            ck_assert_msg(g[i] == 0.0f && !signbit(g[i]), "step %d: gradient %d left %g", s + 1, i, (double)g[i]);
    }
    optim_free(o);
    optim_free(oc);
}

/* Step 1, p = 1, g = 0.1: square_avg = 0.1 * 0.01 = 1e-3; delta = sqrt(0 + 1e-6) / sqrt(1e-3 + 1e-6)
 * * 0.1 = 3.16070e-3; p = 0.99683930. A zero gradient moves nothing (param 3). */
START_TEST(test_adadelta)
{
    static const double want[3][NP] = {{0.996839302, -1.99683812, 0.496837898, 0},
                                       {0.99892302, -2.00087837, 0.493593655, -0.00316226185},
                                       {0.994618037, -2.00087837, 0.494935757, 8.21499248e-05}};
    optim_cfg cfg = {.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f};
    run(&cfg, 1.0f, want);
}
END_TEST

/* Weight decay adds 0.1 p to the gradient before the averages: step 1, p = 1: g = 0.2,
 * delta = 1e-3 / sqrt(4e-3 + 1e-6) * 0.2 = 3.16188e-3, p = 1 - 0.5 delta = 0.99841906. */
START_TEST(test_adadelta_weight_decay)
{
    static const double want[3][NP] = {{0.998419059, -1.99841891, 0.498418926, 0},
                                       {0.99785105, -1.99946208, 0.496797127, -0.00158113092},
                                       {0.995937726, -1.99839674, 0.497094081, 4.11964442e-05}};
    optim_cfg cfg = {.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f, .weight_decay = 0.1f};
    run(&cfg, 0.5f, want);
}
END_TEST

START_TEST(test_sgd)
{
    static const double want[3][NP] = {{0.99, -1.98, 0.47, 0}, {0.995, -2.02, 0.44, -0.1}, {0.975, -2.02, 0.45, 0}};
    optim_cfg cfg = {.kind = OPTIM_SGD};
    run(&cfg, 0.1f, want);
}
END_TEST

/* p = 1: step 1 d = 0.1 + 0.1 * 1 = 0.2, buf = 0.2 (torch's first step), p = 0.98; step 2
 * d = -0.05 + 0.098 = 0.048, buf = 0.9 * 0.2 + 0.048 = 0.228, p = 0.98 - 0.0228 = 0.9572. */
START_TEST(test_sgd_momentum_weight_decay)
{
    static const double want[3][NP] = {
        {0.98, -1.96, 0.465, 0}, {0.9572, -1.9444, 0.39885, -0.1}, {0.907108, -1.910916, 0.3453265, -0.089}};
    optim_cfg cfg = {.kind = OPTIM_SGD, .momentum = 0.9f, .weight_decay = 0.1f};
    run(&cfg, 0.1f, want);
}
END_TEST

/* The flat state is the whole optimizer memory: its layout (Adadelta square_avg then acc_delta),
 * and a run restored from it after step 1 continues exactly like the original. */
START_TEST(test_state_layout_and_restore)
{
    optim_cfg cfgs[3] = {{.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f},
                         {.kind = OPTIM_SGD, .momentum = 0.9f},
                         {.kind = OPTIM_SGD}};
    size_t want_count[3] = {2 * NP, NP, 0};
    for (int c = 0; c < 3; c++) {
        float p[NP], q[NP];
        memcpy(p, P0, sizeof p);
        optim *o = optim_create_on(&nn_cpu, &cfgs[c], NP);
        size_t count;
        float *st = optim_state(o, &count);
        ck_assert_uint_eq(count, want_count[c]);
        optim_step(o, p, GRADS[0], 1.0f);
        if (c == 0) {
            for (int i = 0; i < NP; i++) /* square_avg = (1 - rho) g^2 */
                ck_assert_double_eq_tol(st[i], 0.1 * GRADS[0][i] * GRADS[0][i], 1e-6 * st[i] + 1e-12);
            ck_assert_double_eq_tol(st[NP], 0.1 * 3.16070e-3 * 3.16070e-3, 1e-5 * st[NP]); /* acc_delta */
        } else if (c == 1) {
            for (int i = 0; i < NP; i++) /* buf = grad after one step */
                ck_assert_float_eq(st[i], GRADS[0][i]);
        }
        optim *r = optim_create_on(&nn_cpu, &cfgs[c], NP);
        size_t rcount;
        memcpy(optim_state(r, &rcount), st, count * sizeof *st);
        memcpy(q, p, sizeof q);
        for (int s = 1; s < 3; s++) {
            optim_step(o, p, GRADS[s], 1.0f);
            optim_step(r, q, GRADS[s], 1.0f);
        }
        ck_assert_mem_eq(p, q, sizeof p);
        optim_free(o);
        optim_free(r);
    }
}
END_TEST

/* The vectorised steps (nn_cpu.c: a clone per ISA, chosen by the CPU) against ops.h one element at a time,
 * bit for bit: a clone that fused a multiply and an add (FMA) would change the last bits, and the same
 * run on two CPUs would differ. 1003 parameters: vector bodies and a remainder; values from 1e-8 to 10. */
enum { NV = 1003, VSTEPS = 5 };

__attribute__((optimize("fp-contract=off"))) static void reference(const optim_cfg *c, float *p, const float *g,
                                                                   float *st, float lr)
{
    for (volatile int i = 0; i < NV; i++) /* volatile: one element at a time */
        if (c->kind == OPTIM_ADADELTA)
            op_adadelta(p, g, st, st + NV, (size_t)i, lr, c->rho, c->eps, c->weight_decay);
        else
            op_sgd(p, g, st, (size_t)i, lr, c->momentum, c->weight_decay);
}

START_TEST(test_vector_steps_bitwise)
{
    optim_cfg cfgs[2] = {{.kind = OPTIM_ADADELTA, .rho = 0.9f, .eps = 1e-6f, .weight_decay = 0.01f},
                         {.kind = OPTIM_SGD, .momentum = 0.9f, .weight_decay = 0.01f}};
    static float p[NV], q[NV], g[NV], gc[NV], st[2 * NV];
    for (int c = 0; c < 2; c++) {
        uint32_t seed = 12345;
        for (int i = 0; i < NV; i++)
            p[i] = q[i] = (float)(i % 17) - 8.0f + 0.125f * (float)(i % 5);
        memset(st, 0, sizeof st);
        optim *o = optim_create_on(&nn_cpu, &cfgs[c], NV);
        for (int s = 0; s < VSTEPS; s++) {
            for (int i = 0; i < NV; i++) {
                seed = seed * 1664525u + 1013904223u;
                g[i] = gc[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * powf(10.0f, (float)(i % 10) - 8.0f);
            }
            optim_step_clear(o, p, gc, 0.7f);
            reference(&cfgs[c], q, g, st, 0.7f);
            for (int i = 0; i < NV; i++)
                ck_assert_msg(memcmp(&p[i], &q[i], sizeof p[i]) == 0, "%s step %d param %d: %.9g, one at a time %.9g",
                              c ? "sgd" : "adadelta", s + 1, i, (double)p[i], (double)q[i]);
        }
        size_t count;
        ck_assert_mem_eq(optim_state(o, &count), st, (c ? 1 : 2) * NV * sizeof *st);
        optim_free(o);
    }
}
END_TEST

/* The checkpoint names each part of the state: Adadelta's two, SGD's buffer only with momentum, none for an
 * empty model (no division by zero). The names follow optim_kind's order. */
START_TEST(test_state_parts)
{
    optim_cfg cfgs[3] = {{.kind = OPTIM_ADADELTA}, {.kind = OPTIM_SGD, .momentum = 0.5f}, {.kind = OPTIM_SGD}};
    int want[3] = {2, 1, 0};
    const char *first[3] = {"square_avg", "momentum_buffer", "momentum_buffer"};
    for (int c = 0; c < 3; c++) {
        const char *const *names = NULL;
        optim *o = optim_create_on(&nn_cpu, &cfgs[c], NP), *e = optim_create_on(&nn_cpu, &cfgs[c], 0);
        ck_assert_int_eq(optim_state_parts(o, &names), want[c]);
        ck_assert_str_eq(names[0], first[c]);
        if (c == 0)
            ck_assert_str_eq(names[1], "acc_delta");
        ck_assert_int_eq(optim_state_parts(e, &names), 0);
        optim_free(o);
        optim_free(e);
    }
    ck_assert_str_eq(optim_kind_names[OPTIM_ADADELTA], "adadelta");
    ck_assert_str_eq(optim_kind_names[OPTIM_SGD], "sgd");
    ck_assert_ptr_null(optim_kind_names[OPTIM_KINDS]);
}
END_TEST

/* A kind past the list is a programming error, refused before any state is sized for it. */
START_TEST(test_unknown_kind)
{
    optim_cfg cfg = {.kind = OPTIM_KINDS};
    optim_create_on(&nn_cpu, &cfg, NP);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_test(tc, test_adadelta);
    tcase_add_test(tc, test_adadelta_weight_decay);
    tcase_add_test(tc, test_sgd);
    tcase_add_test(tc, test_sgd_momentum_weight_decay);
    tcase_add_test(tc, test_state_layout_and_restore);
    tcase_add_test(tc, test_vector_steps_bitwise);
    tcase_add_test(tc, test_state_parts);
    tcase_add_exit_test(tc, test_unknown_kind, EX_SOFTWARE);
    suite_add_tcase(s, tc);
    return check_run(s);
}
