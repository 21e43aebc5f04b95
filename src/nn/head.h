/* net's training head as one unit (backend.h's head_train; the fused head: docs/gpu.md#variants-for-measurement).
 * It runs what comes between fc1's product and the gradients fc1's backward takes, in one GPU block instead of
 * fifteen kernels and GEMMs:
 * - fc1's bias, ReLU and dropout on h (in place, as fill before the GEMM, relu_forward and dropout_forward);
 * - the last linear layer into z;
 * - log-softmax and NLL into logp and loss, and *loss_sum += their sum (add_losses);
 * - dz = g * the logits' gradient, and dw and db += the layer's gradients;
 * - dh = the gradient of h through the layer, the dropout and the ReLU;
 * - dhb += fc1's bias gradient, dh's sums over the samples (fc1's sum_add).
 * kernels.h holds its phases (kern_head_*), run in order with a barrier between them. */
#ifndef MNIST_HEAD_H
#define MNIST_HEAD_H
#include <stdint.h>

typedef struct {
    float *h;            /* [N][D]: fc1's product without its bias; then with it, through the ReLU and dropout */
    const float *hb;     /* [D]: fc1's bias */
    float *dhb;          /* [D]: its gradient, added to */
    const uint64_t *ids; /* the samples' global indices, the dropout's keys (op_dropout_key) */
    uint64_t key;        /* the epoch's dropout key */
    int layer;           /* the dropout layer's number in that key */
    float p;             /* its drop probability */
    const float *w, *b;  /* the linear layer: w [K][D], b [K] */
    float *dw, *db;      /* its gradients, added to */
    const uint8_t *labels;
    float g;              /* the loss gradient's scale (1 / the global batch) */
    float *z, *logp, *dz; /* [N][K] */
    float *loss;          /* [N] */
    double *loss_sum;     /* one double */
    float *dh;            /* [N][D] */
    int N, D, K;
} nn_head;
#endif
