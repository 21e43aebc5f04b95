/* gpu_backend: net's conv2 without a column buffer (MNIST_DDP_CONV2=direct) on both backends (see gpu_backend.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/conv_pool_tf32.h"
#include "nn/layers.h"
#include "gpu_backend.h"

/* v in TF32, as a float (op_tf32). */
static float tf32_value(float v)
{
    uint32_t u = op_tf32(v);
    memcpy(&v, &u, sizeof v);
    return v;
}

/* "label part" in buf (96 bytes). */
static const char *named(char *buf, const char *label, const char *part)
{
    snprintf(buf, 96, "%s %s", label, part);
    return buf;
}

/* bk[1]'s conv2 direct (label) on net's conv2 against the CPU's im2col, GEMMs and pool (sums in another order:
 * TOL_ROUND; an argmax may differ only where its window's two values are within rounding), the backward from the
 * CPU's pooled outputs and argmaxes on both. */
static void kernels_against_cpu(const char *label)
{
    enum { N = 9, C = 32, H = 26, W = 26, F = 64, OUT = F * N * 12 * 12, IN = C * N * H * W, KW = F * C * 9 };
    char what[96];
    float *xh = rnd(IN, -1, 1);
    for (size_t i = 0; i < IN; i++)
        xh[i] = xh[i] > 0.0f ? xh[i] : 0.0f; /* conv1's ReLU output */
    twin x = twin_new(xh, IN * sizeof(float)), w = twin_rnd(KW, -0.1f, 0.1f), b = twin_rnd(F, -0.2f, 0.2f);
    twin y = twin_new(NULL, (size_t)F * N * 24 * W * sizeof(float)), py = twin_new(NULL, OUT * sizeof(float));
    twin arg = twin_new(NULL, OUT * sizeof(int32_t)), col = twin_new(NULL, conv_scratch(C, H, W, 3, 0, N, 1) * 4);
    BOTH(conv_pool_forward(be, P(x), P(w), P(b), P(y), P(py), (int32_t *)P(arg), NULL, N, C, H, W, F, 3, 0, P(col), N,
                           1));
    check(named(what, label, "with its pool (net conv2, 9 samples)"), &py, OUT, TOL_ROUND);
    int32_t *a0 = fetch(0, arg.p[0], OUT * sizeof *a0), *a1 = fetch(1, arg.p[1], OUT * sizeof *a1);
    const float *y0 = y.p[0]; /* the CPU's convolution output, rows W long */
    size_t differ = 0, wrong = 0;
    for (size_t i = 0; i < OUT; i++) {
        const float *plane = y0 + i / 144 * 24 * W;
        differ += a0[i] != a1[i];
        wrong += a0[i] != a1[i] && (a1[i] < 0 || a1[i] >= 24 * W || fabsf(plane[a0[i]] - plane[a1[i]]) > 1e-5f);
    }
    printf("%-4s %-46s %zu of %d differ, %zu beyond a tie\n", wrong ? "FAIL" : "ok", named(what, label, "argmaxes"),
           differ, OUT, wrong);
    failures += wrong != 0;
    bk[1]->upload(py.p[1], py.p[0], OUT * sizeof(float));
    bk[1]->upload(arg.p[1], arg.p[0], OUT * sizeof(int32_t));
    twin dpy = twin_rnd(OUT, -1, 1), dw = twin_rnd(KW, -0.1f, 0.1f), db = twin_rnd(F, -0.1f, 0.1f);
    twin dx = twin_new(NULL, IN * sizeof(float));
    BOTH(pool_conv_backward(be, P(dpy), NULL, P(py), (int32_t *)P(arg), P(x), P(x), P(w), P(y), P(dw), P(db), P(dx), N,
                            C, H, W, F, 3, 0, P(col), N, 1));
    check(named(what, label, "weight gradient"), &dw, KW, TOL_ROUND);
    check(named(what, label, "bias gradient"), &db, F, TOL_ROUND);
    check(named(what, label, "input gradient (conv1's ReLU)"), &dx, IN, TOL_ROUND);
    free(xh), free(a0), free(a1);
    twin_free(&x), twin_free(&w), twin_free(&b), twin_free(&y), twin_free(&py), twin_free(&arg), twin_free(&col);
    twin_free(&dpy), twin_free(&dw), twin_free(&db), twin_free(&dx);
}

/* MNIST_DDP_CONV2=direct: net's conv2 with its pool as one kernel and its gradients as two, against the CPU; then
 * net alone and with all four switches. */
void test_conv2_direct(const tolerances *t)
{
    const nn_backend *composed = bk[1];
    bk[1] = nn_cuda(NN_CUDA_CONV2_DIRECT);
    kernels_against_cpu("conv2 direct");
    printf("-- conv2 direct (MNIST_DDP_CONV2=direct): net; with all four switches\n");
    test_model("net", NET_BATCH, t);
    bk[1] = nn_cuda(NN_CUDA_CONV2_DIRECT | NN_CUDA_POOL_FUSED | NN_CUDA_HEAD_FUSED | NN_CUDA_CONV1_DIRECT);
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}

/* --precision tf32 with MNIST_DDP_CONV2=direct: the forward and the input gradient on tensor cores (k_cpt_forward,
 * k_cpxt_xgrad) against the CPU's composition of the same inputs rounded to TF32 (products exact, sums in another
 * order: TOL_ROUND), then net with them under tf32's tolerances. */
void test_conv2_tf32(const tolerances *t)
{
    enum { N = 9, C = 32, H = 26, W = 26, F = 64, OUT = F * N * 12 * 12, IN = C * N * H * W, KW = F * C * 9 };
    const nn_backend *composed = bk[1];
    bk[1] = nn_cuda(NN_CUDA_CONV2_DIRECT | NN_CUDA_TF32);
    float *xh = rnd(IN, -1, 1), *wh = rnd(KW, -0.1f, 0.1f), *xr = malloc(IN * sizeof *xr), *wr = malloc(KW * 4);
    for (size_t i = 0; i < IN; i++) {
        xh[i] = xh[i] > 0.0f ? xh[i] : 0.0f;
        xr[i] = tf32_value(xh[i]);
    }
    for (size_t i = 0; i < KW; i++)
        wr[i] = tf32_value(wh[i]);
    twin x = twin_new(xr, IN * sizeof(float)), w = twin_new(wr, KW * sizeof(float)), b = twin_rnd(F, -0.2f, 0.2f);
    bk[1]->upload(x.p[1], xh, IN * sizeof(float)); /* the kernel rounds as it stages */
    bk[1]->upload(w.p[1], wh, KW * sizeof(float));
    twin y = twin_new(NULL, (size_t)F * N * 24 * W * sizeof(float)), py = twin_new(NULL, OUT * sizeof(float));
    twin arg = twin_new(NULL, OUT * sizeof(int32_t)), col = twin_new(NULL, conv_scratch(C, H, W, 3, 0, N, 1) * 4);
    BOTH(conv_pool_forward(be, P(x), P(w), P(b), P(y), P(py), (int32_t *)P(arg), NULL, N, C, H, W, F, 3, 0, P(col), N,
                           1));
    check("conv2 direct on TF32 tensor cores (inputs in TF32)", &py, OUT, TOL_ROUND);
    /* The input gradient from the CPU's pooled outputs and argmaxes, its pooled gradient in TF32 on the CPU (the
     * weight gradients, fp32 from the unrounded one on the GPU, are test_conv2_direct's). */
    bk[1]->upload(py.p[1], py.p[0], OUT * sizeof(float));
    bk[1]->upload(arg.p[1], arg.p[0], OUT * sizeof(int32_t));
    float *gh = rnd(OUT, -1, 1), *gr = malloc(OUT * sizeof *gr);
    for (size_t i = 0; i < OUT; i++)
        gr[i] = tf32_value(gh[i]);
    twin dpy = twin_new(gr, OUT * sizeof(float)), dw = twin_new(NULL, KW * sizeof(float)),
         db = twin_new(NULL, F * sizeof(float)), dx = twin_new(NULL, IN * sizeof(float));
    bk[1]->upload(dpy.p[1], gh, OUT * sizeof(float));
    BOTH(pool_conv_backward(be, P(dpy), NULL, P(py), (int32_t *)P(arg), P(x), P(x), P(w), P(y), P(dw), P(db), P(dx), N,
                            C, H, W, F, 3, 0, P(col), N, 1));
    check("conv2 direct input gradient on TF32 tensor cores", &dx, IN, TOL_ROUND);
    free(xh), free(wh), free(xr), free(wr), free(gh), free(gr);
    twin_free(&x), twin_free(&w), twin_free(&b), twin_free(&y), twin_free(&py), twin_free(&arg), twin_free(&col);
    twin_free(&dpy), twin_free(&dw), twin_free(&db), twin_free(&dx);
    printf("-- conv2 direct on TF32 tensor cores: net\n");
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}

/* MNIST_DDP_CONV2=3xtf32 outside --precision tf32: the forward and the input gradient on tensor cores in three TF32
 * products each, against the CPU's fp32 composition within fp32's rounding (TOL_ROUND, kernels_against_cpu), then
 * net with them under fp32's tolerances. */
void test_conv2_3xtf32(const tolerances *t)
{
    const nn_backend *composed = bk[1];
    bk[1] = nn_cuda(NN_CUDA_CONV2_DIRECT | NN_CUDA_3XTF32);
    kernels_against_cpu("conv2 direct in 3xTF32");
    printf("-- conv2 direct in 3xTF32 (MNIST_DDP_CONV2=3xtf32): net\n");
    test_model("net", NET_BATCH, t);
    bk[1] = composed;
}
