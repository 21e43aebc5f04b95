/* The GPU's fused kernel bodies (kernels.h: kern_maxpool2_relu, kern_relu_maxpool2_grad, kern_flatten_dropout,
 * kern_dropout_unflatten), one call per flat index as a grid-stride loop makes them, against the unfused pairs of
 * CPU layers they replace (nn_cpu.h), bit for bit; and the CPU's fused entries (cpu_maxpool2_relu_forward...)
 * against the same pairs. Shapes odd on purpose: an odd last row and column in no window, rows longer than
 * the used columns, channel and sample counts that are not powers of two. Inputs hold ties, NaNs, negative
 * values and signed zeros, so the ReLU and the pool's first-maximum rule both matter. The pool on oneDNN's
 * blocked layout (nchw16c.h) against the CPU's fused entries too. net's training head (kern_head, head.h)
 * against the CPU layers it replaces; conv2's pool with dropout1 both ways (kern_pool_flatten_dropout,
 * kern_lane_pool_grad) against the CPU layers they replace; net trained on CPU backends that run the head and
 * these as the GPU does. */
#include "../check_run.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/kernels.h"
#include "nn/layers.h"
#include "nn/cpu/nn_cpu.h"
#include "nn/cpu/nchw16c.h"
#include "base/rng.h"
#include "kernel_testutil.h"
#include "model_testutil.h"

static float *copy_floats(const float *x, size_t n)
{
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* Values from a few levels in [-2, 2] (ties), with a NaN now and then, and -0.0 in place of 0. */
static float *levels(size_t n, uint64_t seed)
{
    float *x = random_floats(n, rng_key(seed, 1), -2, 3);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_below(seed, i, 53) == 0 ? NAN : (int)floorf(x[i]) == 0 ? -0.0f : floorf(x[i]);
    return x;
}

typedef struct {
    int C, N, H, W, ld, bias;
} pool_shape;

static const pool_shape pools[] = {
    {3, 5, 7, 5, 8, 1},    /* odd H and W, rows of 8: net's pool with a bias */
    {2, 3, 6, 9, 9, 0},    /* even H, odd W, no bias (convnet's) */
    {5, 1, 5, 5, 5, 1},    /* one sample */
    {4, 3, 24, 24, 26, 1}, /* net's conv2: 24x24 in rows of 26 */
};

/* Forward then backward of pool + ReLU, fused kernel body against the CPU pair (and the CPU's fused entry). */
START_TEST(test_pool_relu)
{
    const pool_shape *s = &pools[_i];
    int planes = s->C * s->N;
    size_t nx = (size_t)planes * s->H * s->ld, ny = (size_t)planes * (s->H / 2) * (s->W / 2);
    float *x = levels(nx, 40 + (uint64_t)_i), *b = s->bias ? random_floats((size_t)s->C, 41, -1.5f, 1.5f) : NULL;
    float *ye = sentinel(ny * sizeof(float)), *yg = sentinel(ny * sizeof(float)), *yc = sentinel(ny * sizeof(float));
    int32_t *ae = sentinel(ny * sizeof(int32_t)), *ag = sentinel(ny * sizeof(int32_t));
    int32_t *ac = sentinel(ny * sizeof(int32_t));
    cpu_maxpool2_forward(x, ye, ae, planes, s->H, s->W, s->ld);
    if (b)
        cpu_bias_relu_forward(ye, b, s->C, ny / (size_t)s->C);
    else
        cpu_relu_forward(ye, ny);
    for (size_t i = 0; i < ny; i++)
        kern_maxpool2_relu(i, x, b, yg, ag, s->N, s->H, s->W, s->ld);
    cpu_maxpool2_relu_forward(x, b, yc, ac, s->C, s->N, s->H, s->W, s->ld);
    same_floats("pool + relu: kernel y", ye, yg, ny);
    same("pool + relu: kernel arg", ae, ag, ny, sizeof(int32_t), 0, ny);
    same_floats("pool + relu: cpu y", ye, yc, ny);
    same("pool + relu: cpu arg", ae, ac, ny, sizeof(int32_t), 0, ny);

    float *dy = levels(ny, 50 + (uint64_t)_i), *dyc = copy_floats(dy, ny), *dyk = copy_floats(dy, ny);
    float *de = sentinel(nx * sizeof(float)), *dg = sentinel(nx * sizeof(float)), *dc = sentinel(nx * sizeof(float));
    cpu_relu_backward(dy, ye, ny);
    cpu_maxpool2_backward(dy, ae, de, planes, s->H, s->W, s->ld);
    for (size_t i = 0; i < nx; i++)
        kern_relu_maxpool2_grad(i, dyk, ye, ae, dg, s->H, s->W, s->ld);
    cpu_relu_maxpool2_backward(dyc, ye, ae, dc, planes, s->H, s->W, s->ld);
    same_floats("relu + pool backward: kernel dx", de, dg, nx);
    same_floats("relu + pool backward: cpu dx", de, dc, nx);
    free(x), free(b), free(ye), free(yg), free(yc), free(ae), free(ag), free(ac);
    free(dy), free(dyc), free(dyk), free(de), free(dg), free(dc);
}
END_TEST

static const pool_shape blocked_pools[] = {
    {16, 3, 7, 5, 8, 1},    /* odd H and W, rows of 8 */
    {32, 2, 6, 9, 9, 0},    /* no bias, dense rows */
    {64, 2, 24, 24, 26, 1}, /* net's conv2 */
    /* The backward's chunks of 256 outputs: one output short of a chunk, a whole one, one past it (a second chunk
     * of one output), and two chunks with a partial 16-output tile (289 = 256 + 2 x 16 + 1). */
    {16, 2, 2, 510, 512, 1},
    {16, 2, 32, 32, 32, 1},
    {16, 2, 2, 514, 515, 0},
    {16, 1, 35, 34, 34, 1},
};

/* Element (c, n, h, w) of planes [C][N][H] with rows of ld, in nchw16c.h's layout. */
static size_t blocked_index(const pool_shape *s, int c, int n, int h, int w)
{
    size_t pixel = (((size_t)n * (s->C / CHANNEL_BLOCK) + c / CHANNEL_BLOCK) * s->H + h) * s->W + w;
    return pixel * CHANNEL_BLOCK + c % CHANNEL_BLOCK;
}

/* CNHW rows of ld <-> the blocked layout; junk columns (w >= W) come back as zeros. */
static void convert_blocked(const pool_shape *s, float *cnhw, float *blocked, int to_blocked)
{
    for (int c = 0; c < s->C; c++)
        for (int n = 0; n < s->N; n++)
            for (int h = 0; h < s->H; h++)
                for (int w = 0; w < s->ld; w++) {
                    float *v = &cnhw[(((size_t)c * s->N + n) * s->H + h) * s->ld + w];
                    if (w >= s->W)
                        *v = to_blocked ? *v : 0.0f;
                    else if (to_blocked)
                        blocked[blocked_index(s, c, n, h, w)] = *v;
                    else
                        *v = blocked[blocked_index(s, c, n, h, w)];
                }
}

/* Pool + ReLU forward and backward on the blocked layout against the CPU's fused entries on CNHW. */
START_TEST(test_pool_nchw16c)
{
    const pool_shape *s = &blocked_pools[_i];
    int planes = s->C * s->N;
    size_t nx = (size_t)planes * s->H * s->ld, nb = (size_t)planes * s->H * s->W;
    size_t ny = (size_t)planes * (s->H / 2) * (s->W / 2);
    float *x = levels(nx, 70 + (uint64_t)_i), *b = s->bias ? random_floats((size_t)s->C, 71, -1.5f, 1.5f) : NULL;
    float *xb = sentinel(nb * sizeof(float));
    convert_blocked(s, x, xb, 1);
    float *yc = sentinel(ny * sizeof(float)), *yb = sentinel(ny * sizeof(float));
    int32_t *ac = sentinel(ny * sizeof(int32_t)), *ab = sentinel(ny * sizeof(int32_t));
    cpu_maxpool2_relu_forward(x, b, yc, ac, s->C, s->N, s->H, s->W, s->ld);
    nchw16c_maxpool2_relu_forward(xb, b, yb, ab, s->C, s->N, s->H, s->W, s->ld);
    same_floats("blocked pool + relu: y", yc, yb, ny);
    same("blocked pool + relu: arg", ac, ab, ny, sizeof(int32_t), 0, ny);

    float *dy = levels(ny, 80 + (uint64_t)_i), *dyc = copy_floats(dy, ny), *dyb = copy_floats(dy, ny);
    float *dc = sentinel(nx * sizeof(float)), *dxb = sentinel(nb * sizeof(float)), *db = sentinel(nx * sizeof(float));
    cpu_relu_maxpool2_backward(dyc, yc, ac, dc, planes, s->H, s->W, s->ld);
    nchw16c_relu_maxpool2_backward(dyb, yc, ac, dxb, s->C, s->N, s->H, s->W, s->ld);
    convert_blocked(s, db, dxb, 0);
    same_floats("blocked relu + pool backward: dx", dc, db, nx);
    same_floats("blocked relu + pool backward: dy left as it was", dy, dyb, ny);
    free(x), free(b), free(xb), free(yc), free(yb), free(ac), free(ab);
    free(dy), free(dyc), free(dyb), free(dc), free(dxb), free(db);
}
END_TEST

/* The ReLU's gradient from the blocked layout into CNHW against cpu_relu_backward on CNHW: pixel counts with
 * and without a partial last tile (net's conv1 output, 26 x 26). */
START_TEST(test_relu_nchw16c)
{
    static const pool_shape shapes[] = {{16, 3, 7, 5, 5, 0}, {32, 2, 26, 26, 26, 0}};
    const pool_shape *s = &shapes[_i];
    int HW = s->H * s->W;
    size_t n = (size_t)s->C * s->N * HW;
    float *dy = levels(n, 100 + (uint64_t)_i), *y = levels(n, 110 + (uint64_t)_i), *dyb = sentinel(n * sizeof(float));
    convert_blocked(s, dy, dyb, 1);
    float *got = sentinel(n * sizeof(float));
    nchw16c_relu_backward(dyb, y, got, s->C, s->N, HW);
    cpu_relu_backward(dy, y, n);
    same_floats("relu backward from nChw16c", dy, got, n);
    free(dy), free(y), free(dyb), free(got);
}
END_TEST

/* The tiles' transpose of both widths against its definition, bit for bit on any 32-bit pattern (NaN payloads
 * too: moves only), with rows 16, a chunk's 256 and odd counts apart on either side; nothing written beside the
 * tile's 16 columns. The kernels above take the width the CPU picks; this runs both on any CPU. */
START_TEST(test_transpose_tile)
{
    static const struct {
        size_t lds, ldd;
    } strides[] = {{16, 16}, {256, 16}, {16, 256}, {19, 23}};
    size_t lds = strides[_i / 2].lds, ldd = strides[_i / 2].ldd;
    int wide = _i % 2;
    uint32_t *src = malloc(16 * lds * sizeof *src), *dst = malloc(16 * ldd * sizeof *dst), x = 12345u + (uint32_t)_i;
    for (size_t k = 0; k < 16 * lds; k++)
        src[k] = x = x * 1664525u + 1013904223u;
    memset(dst, 0xa5, 16 * ldd * sizeof *dst);
    nchw16c_transpose((const float *)src, lds, (float *)dst, ldd, wide);
    for (size_t j = 0; j < 16; j++)
        for (size_t i = 0; i < ldd; i++) {
            uint32_t want = i < 16 ? src[i * lds + j] : 0xa5a5a5a5u;
            ck_assert_msg(dst[j * ldd + i] == want, "wide %d, lds %zu, ldd %zu: [%zu][%zu] = %#x, expected %#x", wide,
                          lds, ldd, j, i, dst[j * ldd + i], want);
        }
    free(src), free(dst);
}
END_TEST

typedef struct {
    int C, N, HW, dropout;
    float p;
} flat_shape;

static const flat_shape flats[] = {
    {3, 5, 7, 1, 0.25f}, /* net's first dropout rate */
    {2, 7, 9, 1, 0.5f},
    {5, 3, 11, 0, 0.0f},    /* no dropout: evaluation, convnet */
    {64, 3, 144, 1, 0.25f}, /* net's shape */
};

/* Flatten + dropout and its backward, fused kernel bodies against the CPU pairs (and the CPU's fused entries). */
START_TEST(test_flatten_dropout)
{
    const flat_shape *s = &flats[_i];
    size_t n = (size_t)s->C * s->N * s->HW;
    uint64_t key = 0x5eedULL + (uint64_t)_i, *ids = malloc((size_t)s->N * sizeof *ids);
    for (int k = 0; k < s->N; k++)
        ids[k] = rng_u64(60, (uint64_t)k) % 60000;
    float *x = random_floats(n, rng_key(61, (uint64_t)_i), -1, 1);
    float *ye = sentinel(n * sizeof(float)), *yg = sentinel(n * sizeof(float)), *yc = sentinel(n * sizeof(float));
    float *me = NULL, *mg = NULL, *mc = NULL;
    if (s->dropout) {
        me = sentinel(n * sizeof(float)), mg = sentinel(n * sizeof(float)), mc = sentinel(n * sizeof(float));
    }
    cpu_flatten_cnhw(x, ye, s->C, s->N, s->HW);
    if (me)
        cpu_dropout_forward(ye, me, s->N, s->C * s->HW, ids, key, 0, s->p);
    for (size_t i = 0; i < n; i++)
        kern_flatten_dropout(i, x, yg, mg, s->C, s->N, s->HW, ids, key, 0, s->p);
    cpu_flatten_dropout_forward(x, yc, mc, s->C, s->N, s->HW, ids, key, 0, s->p);
    same_floats("flatten + dropout: kernel y", ye, yg, n);
    same_floats("flatten + dropout: cpu y", ye, yc, n);
    if (me) {
        same_floats("flatten + dropout: kernel mask", me, mg, n);
        same_floats("flatten + dropout: cpu mask", me, mc, n);
    }

    float *dy = random_floats(n, rng_key(62, (uint64_t)_i), -1, 1);
    float *dyc = copy_floats(dy, n), *dyk = copy_floats(dy, n);
    float *de = sentinel(n * sizeof(float)), *dg = sentinel(n * sizeof(float)), *dc = sentinel(n * sizeof(float));
    if (me)
        cpu_dropout_backward(dy, me, n);
    cpu_unflatten_cnhw(dy, de, s->C, s->N, s->HW);
    for (size_t i = 0; i < n; i++)
        kern_dropout_unflatten(i, dyk, me, dg, s->C, s->N, s->HW);
    cpu_dropout_unflatten_backward(dyc, me, dc, s->C, s->N, s->HW);
    same_floats("dropout + unflatten backward: kernel dx", de, dg, n);
    same_floats("dropout + unflatten backward: cpu dx", de, dc, n);
    free(ids), free(x), free(ye), free(yg), free(yc), free(me), free(mg), free(mc);
    free(dy), free(dyc), free(dyk), free(de), free(dg), free(dc);
}
END_TEST

/* Multiples of 1/8 in [lo, hi]: sums of their products are exact in float, in any order. */
static float *eighths(size_t n, uint64_t seed, int lo, int hi)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)rng_below(seed, i, (uint64_t)(8 * (hi - lo) + 1)) + 8 * lo) / 8.0f;
    return v;
}

/* got within rounding of exp: the two sum in different orders (a GEMM; in order, in double). */
static void close_floats(const char *what, const float *exp, const float *got, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabsf(exp[i] - got[i]) <= 1e-7f + 1e-5f * fabsf(exp[i]), "%s[%zu]: %.9g, the CPU %.9g", what, i,
                      (double)got[i], (double)exp[i]);
}

typedef struct {
    int N, D, K;
} head_shape;
static const head_shape heads[] = {{5, 128, 10}, {3, 7, 4}, {1, 9, 3}}; /* net's fc2; odd; one sample */

/* A CPU backend's head_train: kern_head's phases in loops, as src/gpu/cuda/net_head.cu runs them in one block. */
static void loop_head(const nn_head *h)
{
    for (int phase = 0; phase < KERN_HEAD_PHASES; phase++)
        for (uint32_t i = 0; i < kern_head_count(h, phase); i++)
            kern_head(phase, i, h);
}

/* The phases of kern_head in loops, against the CPU's fc1 bias, ReLU, dropout, fc2 (fill + GEMM), log-softmax
 * and NLL, the loss sum, the NLL gradient, fc2's backward (GEMMs, sum_add), the dropout's and the ReLU's
 * backward and fc1's bias gradient (sum_add). On these inputs the logits are exact, so everything up to the
 * logit gradients agrees bit for bit; the gradients summed in another order agree to rounding. dw, db, fc1's
 * bias gradient and the loss sum start nonzero: all add. */
START_TEST(test_net_head)
{
    const head_shape *s = &heads[_i];
    int N = s->N, D = s->D, K = s->K;
    size_t nd = (size_t)N * D, nk = (size_t)N * K, kd = (size_t)K * D;
    float *h = eighths(nd, rng_key(70, (uint64_t)_i), -1, 1), *w = eighths(kd, rng_key(71, (uint64_t)_i), -1, 1);
    float *b = eighths((size_t)K, rng_key(72, (uint64_t)_i), -1, 1);
    float *hb = eighths((size_t)D, rng_key(77, (uint64_t)_i), -1, 1), *dhbe = eighths((size_t)D, rng_key(78, 0), -1, 1);
    float *dwe = eighths(kd, rng_key(73, (uint64_t)_i), -1, 1), *dbe = eighths((size_t)K, rng_key(74, 0), -1, 1);
    uint64_t ids[8];
    uint8_t labels[8];
    for (int n = 0; n < N; n++) {
        ids[n] = rng_u64(75, (uint64_t)n) % 60000;
        labels[n] = (uint8_t)rng_below(76, (uint64_t)n, (uint64_t)K);
    }
    float g = 1.0f / 64.0f, p = 0.5f;
    uint64_t key = 0xfeedULL + (uint64_t)_i;
    float *he = copy_floats(h, nd), *mask = malloc(nd * sizeof(float)), *ze = sentinel(nk * sizeof(float));
    float *lpe = sentinel(nk * sizeof(float)), *losse = sentinel((size_t)N * sizeof(float));
    float *dze = sentinel(nk * sizeof(float)), *dhe = sentinel(nd * sizeof(float));
    double sume = 0.25;
    cpu_fill(he, hb, N, (size_t)D, (size_t)D, 0); /* fc1's bias, then its product added (exact: eighths) */
    for (size_t i = 0; i < nd; i++)
        he[i] += h[i];
    cpu_relu_forward(he, nd);
    cpu_dropout_forward(he, mask, N, D, ids, key, 1, p);
    linear_forward(&nn_cpu, he, w, b, ze, N, D, K);
    cpu_log_softmax_nll_forward(ze, labels, lpe, losse, N, K);
    cpu_add_losses(losse, N, &sume);
    cpu_log_softmax_nll_backward(lpe, labels, dze, N, K, g);
    linear_backward(&nn_cpu, he, w, dze, dwe, dbe, dhe, N, D, K);
    cpu_dropout_backward(dhe, mask, nd);
    cpu_relu_backward(dhe, he, nd);
    cpu_sum_add(dhbe, dhe, D, (size_t)N, 1, (size_t)D);

    nn_head a = {.h = copy_floats(h, nd),
                 .hb = hb,
                 .dhb = eighths((size_t)D, rng_key(78, 0), -1, 1),
                 .ids = ids,
                 .key = key,
                 .layer = 1,
                 .p = p,
                 .w = w,
                 .b = b,
                 .dw = eighths(kd, rng_key(73, (uint64_t)_i), -1, 1),
                 .db = eighths((size_t)K, rng_key(74, 0), -1, 1),
                 .labels = labels,
                 .g = g,
                 .z = sentinel(nk * sizeof(float)),
                 .logp = sentinel(nk * sizeof(float)),
                 .dz = sentinel(nk * sizeof(float)),
                 .loss = sentinel((size_t)N * sizeof(float)),
                 .loss_sum = malloc(sizeof(double)),
                 .dh = sentinel(nd * sizeof(float)),
                 .N = N,
                 .D = D,
                 .K = K};
    *a.loss_sum = 0.25;
    loop_head(&a);
    same_floats("head: h after dropout", he, a.h, nd);
    same_floats("head: logits", ze, a.z, nk);
    same_floats("head: log-softmax", lpe, a.logp, nk);
    same_floats("head: loss", losse, a.loss, (size_t)N);
    same_floats("head: logit gradient", dze, a.dz, nk);
    ck_assert_msg(sume == *a.loss_sum, "head: loss sum %.17g, the CPU %.17g", *a.loss_sum, sume);
    close_floats("head: dh", dhe, a.dh, nd);
    close_floats("head: fc2 weight gradient", dwe, a.dw, kd);
    close_floats("head: fc2 bias gradient", dbe, a.db, (size_t)K);
    close_floats("head: fc1 bias gradient", dhbe, a.dhb, (size_t)D);
    size_t kept = 0, zero = 0;
    for (size_t i = 0; i < nd; i++)
        kept += mask[i] != 0.0f, zero += a.dh[i] == 0.0f;
    ck_assert_msg(nd < 8 || (kept > 0 && kept < nd && zero > nd - kept), "head: %zu kept, %zu zero", kept, zero);
    free(h), free(w), free(b), free(dwe), free(dbe), free(he), free(mask), free(ze), free(lpe), free(losse);
    free(dze), free(dhe), free(a.h), free(a.dw), free(a.db), free(a.z), free(a.logp), free(a.dz), free(a.loss);
    free(hb), free(dhbe), free(a.dhb);
    free(a.loss_sum), free(a.dh);
}
END_TEST

/* Pool, ReLU, flatten and dropout in one pass (kern_pool_flatten_dropout, MNIST_DDP_POOL=fused) against the CPU's
 * maxpool2_relu_forward then flatten_dropout_forward, bit for bit: the pooled output and argmaxes, the flattened
 * output and the mask, every element written; with the dropout and without (mask NULL, evaluation). */
START_TEST(test_pool_flatten_dropout)
{
    const pool_shape *s = &pools[_i];
    int OP = (s->H / 2) * (s->W / 2);
    size_t nx = (size_t)s->C * s->N * s->H * s->ld, ny = (size_t)s->C * s->N * OP;
    float *x = levels(nx, 120 + (uint64_t)_i), *b = s->bias ? random_floats((size_t)s->C, 121, -1.5f, 1.5f) : NULL;
    uint64_t *ids = malloc((size_t)s->N * sizeof *ids);
    for (int n = 0; n < s->N; n++)
        ids[n] = rng_u64(122, (uint64_t)n) % 60000;
    for (int drop = 0; drop < 2; drop++) {
        float *y[2], *f[2], *m[2] = {NULL, NULL};
        int32_t *a[2];
        for (int k = 0; k < 2; k++) {
            y[k] = sentinel(ny * sizeof(float)), f[k] = sentinel(ny * sizeof(float));
            a[k] = sentinel(ny * sizeof(int32_t)), m[k] = drop ? sentinel(ny * sizeof(float)) : NULL;
        }
        cpu_maxpool2_relu_forward(x, b, y[0], a[0], s->C, s->N, s->H, s->W, s->ld);
        cpu_flatten_dropout_forward(y[0], f[0], m[0], s->C, s->N, OP, ids, 0x5eedULL, 0, 0.25f);
        for (size_t j = 0; j < ny; j++)
            kern_pool_flatten_dropout(j, x, b, y[1], a[1], f[1], m[1], s->C, s->N, s->H, s->W, s->ld, ids, 0x5eedULL, 0,
                                      0.25f);
        same_floats("pool + flatten + dropout: y", y[0], y[1], ny);
        same("pool + flatten + dropout: arg", a[0], a[1], ny, sizeof(int32_t), 0, ny);
        same_floats("pool + flatten + dropout: f", f[0], f[1], ny);
        if (drop)
            same_floats("pool + flatten + dropout: mask", m[0], m[1], ny);
        for (int k = 0; k < 2; k++)
            free(y[k]), free(f[k]), free(a[k]), free(m[k]);
    }
    free(x), free(b), free(ids);
}
END_TEST

/* Its backward with conv2's bias gradient in one reduction (kern_lane_pool_grad) as k_dropout_pool_grad_part and
 * k_sum_finish run it, against the CPU's dropout_unflatten_backward, relu_maxpool2_backward and sum_add over its
 * output: dx bit for bit, every element written (the CPU writes all of them, junk columns and rows too); db bit
 * for bit as well, the sums being exact on these inputs (eighths, a mask of 0 and 2). Shapes: net's conv2 (wide
 * rows) over several slices, odd sides (a last row and column in no window), one sample; with the mask and
 * without. db starts nonzero: it adds. */
START_TEST(test_pool_grad_sum)
{
    static const struct {
        int C, N, H, W, ld;
    } cases[] = {{2, 40, 24, 24, 26}, {2, 3, 7, 9, 11}, {5, 1, 4, 4, 4}};
    int C = cases[_i / 2].C, N = cases[_i / 2].N, H = cases[_i / 2].H, W = cases[_i / 2].W, ld = cases[_i / 2].ld;
    size_t count = (size_t)N * (H / 2) * (W / 2), nx = (size_t)C * N * H * ld, ny = (size_t)C * count;
    float *x = random_floats(nx, rng_key(90, (uint64_t)_i), -1, 1), *y = malloc(ny * sizeof *y);
    int32_t *arg = malloc(ny * sizeof *arg);
    cpu_maxpool2_forward(x, y, arg, C * N, H, W, ld); /* about half the pooled values <= 0: the ReLU's gradient 0 */
    float *dy = eighths(ny, rng_key(91, (uint64_t)_i), -1, 1), *dye = copy_floats(dy, ny), *mask = NULL;
    if (_i % 2) {
        mask = eighths(ny, rng_key(93, (uint64_t)_i), 0, 1);
        for (size_t j = 0; j < ny; j++)
            mask[j] = mask[j] < 0.5f ? 0.0f : 2.0f;
    }
    float *dbe = eighths((size_t)C, rng_key(92, 0), -1, 1), *dbg = copy_floats(dbe, (size_t)C);
    float *dp = malloc(ny * sizeof *dp), *dxe = sentinel(nx * sizeof(float)), *dxg = sentinel(nx * sizeof(float));
    cpu_dropout_unflatten_backward(dye, mask, dp, C, N, (H / 2) * (W / 2));
    cpu_relu_maxpool2_backward(dp, y, arg, dxe, C * N, H, W, ld);
    cpu_sum_add(dbe, dxe, C, (size_t)N * H * ld, (size_t)N * H * ld, 1);
    int slices = kern_red_slices(C, count);
    double *part = malloc((size_t)C * slices * sizeof *part), lane[KERN_LANES];
    for (int c = 0; c < C; c++)
        for (int s = 0; s < slices; s++) {
            size_t lo, hi;
            op_slice(count, slices, s, &lo, &hi);
            for (unsigned l = 0; l < KERN_LANES; l++)
                lane[l] = kern_lane_pool_grad((uint32_t)c, dy, mask, y, arg, dxg, lo, hi, C, N, H, W, ld, l);
            part[(size_t)c * slices + s] = tree(lane);
        }
    for (int c = 0; c < C; c++)
        kern_sum_finish((size_t)c, part, slices, dbg);
    same_floats("pool gradient", dxe, dxg, nx);
    same_floats("bias gradient from the pooled gradient", dbe, dbg, (size_t)C);
    ck_assert_msg(_i / 2 != 0 || slices > 1, "net's conv2 case in %d slice", slices);
    free(x), free(y), free(arg), free(dy), free(dye), free(mask), free(dbe), free(dbg), free(dp), free(dxe), free(dxg);
    free(part);
}
END_TEST

/* A CPU backend's MNIST_DDP_POOL=fused entries: kern_pool_flatten_dropout over every index; kern_lane_pool_grad
 * over each channel in one slice, its lanes added in order (the GPU's tree and slices change only the
 * rounding); kern_col2im with the ReLU over the chunk's indices. Each counts its calls (the model took the path). */
static int pool_calls[3];

static void loop_pool_dropout(const float *x, const float *b, float *y, int32_t *arg, float *f, float *mask, int C,
                              int N, int H, int W, int ld, const uint64_t *ids, uint64_t key, int layer, float p)
{
    pool_calls[0]++;
    for (size_t j = 0; j < (size_t)C * N * (H / 2) * (W / 2); j++)
        kern_pool_flatten_dropout(j, x, b, y, arg, f, mask, C, N, H, W, ld, ids, key, layer, p);
}

static int loop_pool_sum(const float *dy, const float *mask, const float *y, const int32_t *arg, float *dx, float *db,
                         int C, int N, int H, int W, int ld)
{
    size_t count = (size_t)N * (H / 2) * (W / 2);
    pool_calls[1]++;
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (unsigned l = 0; l < KERN_LANES; l++)
            s += kern_lane_pool_grad((uint32_t)c, dy, mask, y, arg, dx, 0, count, C, N, H, W, ld, l);
        db[c] += (float)s;
    }
    return 1;
}

static void loop_col2im_relu(const float *dcol, float *dx, const float *relu, int N, int C, int H, int W, int k,
                             int pad, int n0, int ns, int wide)
{
    pool_calls[2]++;
    for (size_t i = 0; i < (size_t)C * ns * H * W; i++)
        kern_col2im((uint32_t)i, dcol, dx, relu, N, H, W, k, pad, n0, ns, wide);
}

/* The model's wiring of the GPU's fused paths, tested without a GPU on CPU backends that run their
 * host+device phases in loops: the head (networks.c: fc1's product without its bias, the head's bias, ReLU,
 * dropout and bias gradient, fc1's backward without it) and conv2's pool with dropout1 both ways, conv2's bias
 * gradient and conv1's ReLU backward in col2im (layers.c's conv_pool_forward, pool_conv_backward), each alone and
 * together. */
START_TEST(test_fused_training)
{
    nn_backend be = nn_cpu;
    be.head_train = loop_head;
    same_training(&be, "fused head");
    be.pool_flatten_dropout_forward = loop_pool_dropout;
    be.dropout_pool_backward_sum = loop_pool_sum;
    be.col2im_relu = loop_col2im_relu;
    same_training(&be, "fused head and pool");
    be.head_train = NULL;
    same_training(&be, "fused pool");
    ck_assert_msg(pool_calls[0] == 2 && pool_calls[1] == 2 && pool_calls[2] >= 2,
                  "the fused pool's entries ran %d, %d, %d times", pool_calls[0], pool_calls[1],
                  pool_calls[2]); /* col2im: once per chunk */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("fused");
    /* test_fused_training trains three models: near Check's default 4 s alone, past it on a loaded machine. */
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_pool_relu, 0, (int)(sizeof pools / sizeof pools[0]));
    tcase_add_loop_test(tc, test_pool_nchw16c, 0, (int)(sizeof blocked_pools / sizeof blocked_pools[0]));
    tcase_add_loop_test(tc, test_relu_nchw16c, 0, 2);
    tcase_add_loop_test(tc, test_transpose_tile, 0, 8);
    tcase_add_loop_test(tc, test_flatten_dropout, 0, (int)(sizeof flats / sizeof flats[0]));
    tcase_add_loop_test(tc, test_net_head, 0, (int)(sizeof heads / sizeof heads[0]));
    tcase_add_loop_test(tc, test_pool_flatten_dropout, 0, (int)(sizeof pools / sizeof pools[0]));
    tcase_add_loop_test(tc, test_pool_grad_sum, 0, 6);
    tcase_add_test(tc, test_fused_training);
    suite_add_tcase(s, tc);
    return check_run(s);
}
