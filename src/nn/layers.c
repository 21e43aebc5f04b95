#include "nn/layers.h"

#include "base/errors.h"

size_t conv_scratch(int C, int H, int W, int k, int pad, int chunk, int wide)
{
    return (size_t)C * k * k * chunk * conv_plane(H, W, k, pad, wide);
}

void conv_forward_range(const nn_backend *be, nn_gemm_fn *gemm, const float *x, const float *w, const float *b,
                        float *y, int N, int C, int H, int W, int F, int k, int pad, float *col, int n0, int n1,
                        int chunk, int wide)
{
    size_t P = conv_plane(H, W, k, pad, wide);
    int K = C * k * k;
    for (; n0 < n1; n0 += chunk) {
        int ns = n1 - n0 < chunk ? n1 - n0 : chunk;
        be->im2col(x, col, N, C, H, W, k, pad, n0, ns, wide);
        /* Bias first, then the GEMM accumulates onto it (beta 1): no extra pass over y. */
        if (b)
            be->fill(y + n0 * P, b, F, ns * P, N * P, 1);
        gemm(0, 0, F, ns * (int)P, K, 1.0f, w, K, col, ns * (int)P, b ? 1.0f : 0.0f, y + n0 * P, N * (int)P);
    }
}

int conv_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C, int H,
                 int W, int F, int k, int pad, float *col, int chunk, int wide)
{
    if (be->conv_forward && be->conv_forward(be, x, w, b, y, N, C, H, W, F, k, pad, wide))
        return 1;
    conv_forward_range(be, be->gemm, x, w, b, y, N, C, H, W, F, k, pad, col, 0, N, chunk, wide);
    return be->keep_col && N <= chunk;
}

/* conv_backward_range's loop; dx through the ReLU whose output relu is in the backend's col2im_relu unless relu
 * is NULL. */
static void backward_range(const nn_backend *be, nn_gemm_fn *gemm, const float *x, const float *w, const float *dy,
                           float *dw, float *dx, const float *relu, int N, int C, int H, int W, int F, int k, int pad,
                           float *col, int n0, int n1, int chunk, int wide)
{
    size_t P = conv_plane(H, W, k, pad, wide);
    int K = C * k * k;
    for (; n0 < n1; n0 += chunk) {
        int ns = n1 - n0 < chunk ? n1 - n0 : chunk;
        const float *dyc = dy + n0 * P;
        if (x) /* NULL: col holds it already (layers.h) */
            be->im2col(x, col, N, C, H, W, k, pad, n0, ns, wide);
        gemm(0, 1, F, K, ns * (int)P, 1.0f, dyc, N * (int)P, col, ns * (int)P, 1.0f, dw, K);
        if (!dx)
            continue;
        gemm(1, 0, K, ns * (int)P, F, 1.0f, w, K, dyc, N * (int)P, 0.0f, col, ns * (int)P);
        if (relu)
            be->col2im_relu(col, dx, relu, N, C, H, W, k, pad, n0, ns, wide);
        else
            be->col2im(col, dx, N, C, H, W, k, pad, n0, ns, wide);
    }
}

void conv_backward_range(const nn_backend *be, nn_gemm_fn *gemm, const float *x, const float *w, const float *dy,
                         float *dw, float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int n0,
                         int n1, int chunk, int wide)
{
    backward_range(be, gemm, x, w, dy, dw, dx, NULL, N, C, H, W, F, k, pad, col, n0, n1, chunk, wide);
}

void conv_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                   float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int chunk, int wide)
{
    if (be->conv_backward && be->conv_backward(be, x, w, dy, dw, db, dx, N, C, H, W, F, k, pad, wide))
        return;
    size_t P = conv_plane(H, W, k, pad, wide);
    be->sum_add(db, dy, F, N * P, N * P, 1);
    conv_backward_range(be, be->gemm, x, w, dy, dw, dx, N, C, H, W, F, k, pad, col, 0, N, chunk, wide);
}

int conv_bias_relu_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int C,
                           int H, int W, int F, int k, int pad, float *col, int chunk, int wide)
{
    if (C == 1 && !wide && be->conv1_bias_relu_forward && be->conv1_bias_relu_forward(x, w, b, y, N, H, W, F, k, pad))
        return 0;
    int kept = conv_forward(be, x, w, NULL, y, N, C, H, W, F, k, pad, col, chunk, wide);
    be->bias_relu_forward(y, b, F, (size_t)N * conv_plane(H, W, k, pad, wide));
    return kept;
}

int conv_pool_forward(const nn_backend *be, const float *x, const float *w, const float *pb, float *y, float *py,
                      int32_t *arg, const nn_flat_dropout *fd, int N, int C, int H, int W, int F, int k, int pad,
                      float *col, int chunk, int wide)
{
    if (be->conv_pool_forward && be->conv_pool_forward(x, w, pb, py, arg, fd, N, C, H, W, F, k, pad, wide))
        return 1;
    if (!y)
        die(EX_SOFTWARE, "conv_pool_forward: the backend declined a shape it covers (no scratch to compose it)");
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad), ld = conv_ld(W, k, pad, wide);
    int kept = conv_forward(be, x, w, NULL, y, N, C, H, W, F, k, pad, col, chunk, wide);
    if (fd && be->pool_flatten_dropout_forward) {
        be->pool_flatten_dropout_forward(y, pb, py, arg, fd->f, fd->mask, F, N, OH, OW, ld, fd->ids, fd->key, fd->layer,
                                         fd->p);
        return kept;
    }
    be->maxpool2_relu_forward(y, pb, py, arg, F, N, OH, OW, ld);
    if (fd)
        be->flatten_dropout_forward(py, fd->f, fd->mask, F, N, (OH / 2) * (OW / 2), fd->ids, fd->key, fd->layer, fd->p);
    return kept;
}

void pool_conv_backward(const nn_backend *be, float *dpy, const nn_flat_dropout *fd, const float *py,
                        const int32_t *arg, const float *x, const float *x_relu, const float *w, float *y, float *dw,
                        float *db, float *dx, int N, int C, int H, int W, int F, int k, int pad, float *col, int chunk,
                        int wide)
{
    if (be->pool_conv_backward &&
        be->pool_conv_backward(dpy, fd, py, arg, x, x_relu, w, dw, db, dx, N, C, H, W, F, k, pad, wide))
        return;
    if (!y)
        die(EX_SOFTWARE, "pool_conv_backward: the backend declined a shape it covers (no scratch to compose it)");
    int OH = conv_out(H, k, pad), OW = conv_out(W, k, pad), ld = conv_ld(W, k, pad, wide);
    if (fd && be->dropout_pool_backward_sum &&
        be->dropout_pool_backward_sum(fd->f, fd->mask, py, arg, y, db, F, N, OH, OW, ld)) {
        const float *relu = be->col2im_relu ? x_relu : NULL;
        backward_range(be, be->gemm, x, w, y, dw, dx, relu, N, C, H, W, F, k, pad, col, 0, N, chunk, wide);
        if (dx && x_relu && !relu)
            be->relu_backward(dx, x_relu, (size_t)C * N * H * W);
        return;
    }
    if (fd)
        be->dropout_unflatten_backward(fd->f, fd->mask, dpy, F, N, (OH / 2) * (OW / 2));
    be->relu_maxpool2_backward(dpy, py, arg, y, F * N, OH, OW, ld);
    conv_backward(be, x, w, y, dw, db, dx, N, C, H, W, F, k, pad, col, chunk, wide);
    if (dx && x_relu)
        be->relu_backward(dx, x_relu, (size_t)C * N * H * W);
}

void linear_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int in,
                    int out)
{
    if (b && be->linear_forward && be->linear_forward(x, w, b, y, N, in, out, 0))
        return;
    if (b)
        be->fill(y, b, N, (size_t)out, (size_t)out, 0);
    be->gemm(0, 1, N, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

void linear_relu_forward(const nn_backend *be, const float *x, const float *w, const float *b, float *y, int N, int in,
                         int out)
{
    if (b && be->linear_forward && be->linear_forward(x, w, b, y, N, in, out, 1))
        return;
    linear_forward(be, x, w, b, y, N, in, out);
    be->relu_forward(y, (size_t)N * (size_t)out);
}

/* The weight gradient and the input gradient read dy and write apart: with a side queue, the first runs beside
 * the other two, joined before the layer's gradients are reported ready. */
void linear_backward(const nn_backend *be, const float *x, const float *w, const float *dy, float *dw, float *db,
                     float *dx, int N, int in, int out)
{
    int side = be->side_fork && dx;
    if (side)
        be->side_fork();
    (side ? be->gemm_side : be->gemm)(1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        be->sum_add(db, dy, out, (size_t)N, 1, (size_t)out);
    if (dx)
        be->gemm(0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    if (side)
        be->side_join();
}
