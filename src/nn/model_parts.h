/* The model's insides, shared by model.c (creation, flat buffers, the step's entries) and networks.c (the
 * networks' tables, allocations and passes); not an interface beyond them. */
#ifndef MNIST_MODEL_PARTS_H
#define MNIST_MODEL_PARTS_H
#include <stdint.h>

#include "base/errors.h"
#include "data/mnist.h"
#include "nn/model.h"

#define BN_MOMENTUM 0.1f
#define BN_EPS      1e-5f
#define MAX_LAYERS  5 /* layers with parameters */
#define MAX_STATS   2 /* BatchNorm layers */
#define MAX_ALLOCS  40

/* The input: IN_C channels of IN_SIDE x IN_SIDE pixels (mnist.h); CLASSES outputs. */
enum { IN_C = 1, IN_SIDE = MNIST_ROWS, CLASSES = MNIST_CLASSES };

/* How a tensor is created and initialised: fan_in > 0 draws U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * fan_in 0 fills with value. */
typedef struct {
    const char *name;
    int ndim;
    int shape[4];
    int fan_in;
    float value;
} tensor_spec;

/* Every layer with parameters has a weight and a bias: layer L's are parameter tensors WEIGHT(L) and
 * BIAS(L), in state_dict order. BatchNorm layer S's running statistics are buffer tensors STATS(S)
 * (running_mean), + 1 (running_var) and + 2 (num_batches_tracked). */
#define LAYER_TENSORS 2
#define STATS_TENSORS 3
#define WEIGHT(L)     (LAYER_TENSORS * (L))
#define BIAS(L)       (WEIGHT(L) + 1)
#define STATS(S)      (STATS_TENSORS * (S))

/* A stride-1 convolution (layers.h): input C x H x W, F filters of k x k, zero padding pad, wide output. */
typedef struct {
    int C, H, W, F, k, pad, wide;
} conv_shape;

/* Activations (forward) and their gradients (backward); buffers are reused where the forward value
 * is dead by the time its gradient is written. */
typedef struct {
    float *h1, *a2, *p2, *f, *mask1, *h3, *mask2, *dh3, *df, *dp, *dh1;
    int32_t *arg2;
} net_acts;

typedef struct {
    float *a1, *b1, *p1, *a2, *b2, *p2, *f, *df, *dp1, *dp2;
    float *mean1, *invstd1, *mean2, *invstd2;
    int32_t *arg1, *arg2;
} convnet_acts;

/* A network: its state_dict tables and passes. forward applies dropout (if the network has any, keyed
 * by ids and key) only when train; backward follows a forward with train set. */
typedef struct {
    const tensor_spec *params, *buffers;
    int nlayers, nstats;
    model_recipe recipe;
    void (*alloc)(model *m); /* activations and im2col scratch */
    void (*forward)(model *m, const float *x, int n, const uint64_t *ids, uint64_t key, int train);
    void (*backward)(model *m, const float *x, int n);
    /* The loss and the head's backward in one backend call (backend.h's head_train), between a training
     * forward and backward; 0 having done nothing (no such backend entry), and then forward went to the
     * logits and backward starts from them. NULL: never (convnet). */
    int (*head)(model *m, const uint8_t *labels, const uint64_t *ids, uint64_t key, int n, float grad_scale);
} architecture;

/* Named views into the flat buffers: a layer's parameters and gradients, a BatchNorm's running stats. */
typedef struct {
    float *w, *b, *dw, *db;
} layer_params;

typedef struct {
    float *mean, *var, *tracked;
} bn_stats;

struct model {
    const nn_backend *be;
    const architecture *arch;
    model_kind kind;
    int capacity, chunk;
    int ntensors, nbuffers;
    tensor_desc tensors[LAYER_TENSORS * MAX_LAYERS], buffers[STATS_TENSORS * MAX_STATS];
    size_t nparams, nbufs;
    float *params, *grads, *bufs, *col;
    const float *col_x; /* the input whose im2col (or backend copy) the last conv_forward kept, or NULL */
    layer_params layer[MAX_LAYERS];
    bn_stats stats[MAX_STATS];
    float *logits, *logp, *dlogits; /* [capacity][CLASSES] */
    float *loss;                    /* [capacity] */
    double *loss_sum;               /* [2], backend memory: training losses until model_take_loss; evaluation */
    grad_ready_fn hook;
    void *hook_ctx;
    grad_poll_fn poll;
    void *poll_ctx;
    union {
        net_acts net;
        convnet_acts cnn;
    } a;
    void *mem[MAX_ALLOCS];
    int nmem;
    size_t mem_bytes; /* of mem's entries */
};

/* By model_kind (networks.c). */
extern const architecture architectures[MODEL_KINDS];

/* Backend memory that model_free releases. */
static inline void *model_mem(model *m, size_t bytes)
{
    if (m->nmem == MAX_ALLOCS)
        die(EX_SOFTWARE, "model allocation table full");
    m->mem_bytes += bytes;
    return m->mem[m->nmem++] = m->be->alloc(bytes);
}

static inline float *model_floats(model *m, size_t count) { return model_mem(m, count * sizeof(float)); }

/* Layer L's parameter gradients are final: hand their range to the hook. */
static inline void grads_ready(model *m, int L)
{
    if (m->hook) {
        const tensor_desc *w = &m->tensors[WEIGHT(L)], *b = &m->tensors[BIAS(L)];
        m->hook(m->hook_ctx, w->offset, b->offset + b->count - w->offset);
    }
}
#endif
