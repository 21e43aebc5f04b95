/* What the parts of the gpu_backend program share (the CUDA backend against the CPU backend, see
 * gpu_backend.c): the two backends, memory on both (twins), random host data, and the comparisons, which
 * print one line each and count the failures. gpu_backend.c holds the primitives, the tolerances and
 * main; gpu_backend_models.c the whole models; gpu_backend_conv2.c conv2 direct;
 * gpu_backend_util.c these helpers. */
#ifndef MNIST_GPU_BACKEND_H
#define MNIST_GPU_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"

/* Bit for bit, and few-ulp elementwise differences (see gpu_backend.c's header comment). */
#define TOL_EXACT 0.0
#define TOL_ROUND 1e-5
/* The loss sum in double on both devices, in another order. */
#define TOL_SUM   1e-12

/* The tolerances of one cuBLAS precision, relative to the reference's scale (see compare_metric); the
 * three sets, and what they were set from, in gpu_backend.c. */
typedef struct {
    const char *precision;
    double gemm;  /* max |diff| of C = alpha op(A) op(B) + beta C with U(-1, 1) operands */
    double loss;  /* the model's loss, relative */
    double model; /* gradients, BatchNorm running statistics; fp32 also the updates and evaluation */
    int reduced;  /* tf32/bf16: tensors by rms difference, no optimizer step or evaluation */
} tolerances;

/* The two backends: 0 the reference (CPU), 1 the one under test (CUDA). */
extern const nn_backend *bk[2];
extern int failures; /* comparisons out of tolerance so far */

/* The same data on both backends: p[0] CPU memory, p[1] GPU memory. */
typedef struct {
    void *p[2];
    size_t bytes;
} twin;

/* n bytes on both backends, from host (NULL: zeroed). */
twin twin_new(const void *host, size_t bytes);
void twin_free(twin *t);

/* Runs call once per backend with `be` the backend and P(t) the twin's memory on it. */
#define BOTH(call)                         \
    do {                                   \
        for (int s_ = 0; s_ < 2; s_++) {   \
            const nn_backend *be = bk[s_]; \
            (void)be;                      \
            call;                          \
        }                                  \
    } while (0)
#define P(t) ((t).p[s_])

/* bytes at src on backend s, downloaded (malloc'ed). */
void *fetch(int s, const void *src, size_t bytes);

/* Random host data (malloc'ed), every call from a new key: floats U(lo, hi); integers -1 .. levels - 2
 * as floats (many exact ties); bytes below `below`; uint64 below `below` (0: any). twin_rnd: floats
 * U(lo, hi) on both backends. */
float *rnd(size_t n, float lo, float hi);
float *rnd_levels(size_t n, int levels);
uint8_t *rnd_bytes(size_t n, unsigned below);
uint64_t *rnd_u64(size_t n, uint64_t below);
twin twin_rnd(size_t n, float lo, float hi);

/* ref (CPU) against got (GPU) within tol (0: bit for bit), see gpu_backend_util.c; compare_metric with
 * a floor `least` under the scale, an absolute slack, and l2 for root-mean-square differences. */
void compare_metric(const char *what, const float *ref, const float *got, size_t n, double tol, double least,
                    double slack, int l2);
void compare(const char *what, const float *ref, const float *got, size_t n, double tol);
/* A twin's n floats, or its raw bytes (bit for bit), downloaded from both backends and compared. */
void check(const char *what, const twin *t, size_t n, double tol);
void check_bytes(const char *what, const twin *t);
/* Two scalars: relative difference within tol. */
void check_scalar(const char *what, double ref, double got, double tol);

/* Batch sizes of the model comparison: the recipes' (net 64, convnet 100). */
enum { NET_BATCH = 64, CONVNET_BATCH = 100 };

/* gpu_backend_models.c: a whole model's forward + backward, and with fp32 an optimizer step and an
 * evaluation, on both backends (n samples). */
void test_model(const char *name, int n, const tolerances *t);

/* gpu_backend_conv2.c: MNIST_DDP_CONV2=direct's kernels and net with them; test_conv2_tf32 with --precision tf32. */
void test_conv2_direct(const tolerances *t);
void test_conv2_tf32(const tolerances *t);
void test_conv2_3xtf32(const tolerances *t); /* MNIST_DDP_CONV2=3xtf32, fp32 */
#endif
