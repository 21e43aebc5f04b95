/* The networks: parameters in one flat float buffer, gradients in a second of identical layout,
 * tensors named as in the PyTorch state_dict (llm.c style). So zeroing gradients is one pass (the
 * optimizer's: optim_step_clear), all-reducing them is one buffer, and checkpoints map one to one onto PyTorch. */
#ifndef MNIST_MODEL_H
#define MNIST_MODEL_H
#include <stddef.h>
#include <stdint.h>

#include "nn/backend.h"
#include "nn/optim.h"

typedef struct {
    const char *name; /* PyTorch state_dict name, e.g. "conv1.weight" */
    int ndim;
    int shape[4];
    size_t offset; /* in floats, into the flat buffer */
    size_t count;
} tensor_desc;

typedef struct model model;

/* The networks, named in options, files and messages by model_kind_names (this order, NULL-terminated). */
typedef enum { MODEL_NET, MODEL_CONVNET, MODEL_KINDS } model_kind;
extern const char *const model_kind_names[];
/* The kind a name means, or -1 when it names none. */
int model_kind_of(const char *name);

/* The recipe of the PyTorch example each network comes from: the defaults of --batch-size, --optimizer
 * and --lr. */
typedef struct {
    int batch;
    optim_kind optimizer;
    double lr;
    int lr_times_world; /* the linear scaling rule: lr x world size */
} model_recipe;
const model_recipe *model_recipe_of(model_kind kind);

/* Called during backward, back to front, as soon as a layer's parameter gradients (one contiguous
 * range, e.g. fc2.weight + fc2.bias) are final, so the trainer can start all-reducing that bucket.
 * The ranges of one backward pass are disjoint, descending, and cover all parameters. */
typedef void (*grad_ready_fn)(void *ctx, size_t offset, size_t count);
/* Called now and then inside a long backward pass (between its samples, from the main thread), so the trainer
 * can move the all-reduce of buckets already started along. */
typedef void (*grad_poll_fn)(void *ctx);

/* "net" (the PyTorch MNIST example) or "convnet" on a backend (nn_cpu, nn_cuda); NULL for a kind out of range.
 * capacity = the most samples one forward call takes; activation memory grows with it (about 0.6 MB per
 * sample for net). Parameters, gradients, buffers and activations are the backend's memory: model_params()
 * and friends return its pointers, and the host reaches them through model_upload/model_download. */
model *model_create_on(const nn_backend *be, model_kind kind, int capacity);
const nn_backend *model_backend(const model *m);
void model_free(model *m);
const char *model_name(const model *m);
int model_capacity(const model *m);
/* The backend memory the model holds: parameters, gradients (unless placed elsewhere), activations, scratch. */
size_t model_backend_bytes(const model *m);

int model_num_tensors(const model *m); /* parameters, state_dict order */
const tensor_desc *model_tensor(const model *m, int i);
size_t model_num_params(const model *m);
float *model_params(model *m);
float *model_grads(model *m);
/* From now on the gradients live at grads (model_num_params floats the caller owns and keeps until
 * model_free: the collectives' shared memory); zeroes them. */
void model_place_grads(model *m, float *grads);

/* Non-trainable state (BatchNorm running_mean, running_var, num_batches_tracked as float) in its
 * own flat buffer, with state_dict names; none for "net". */
int model_num_buffers(const model *m);
const tensor_desc *model_buffer(const model *m, int i);
size_t model_buffer_size(const model *m);
float *model_buffers(model *m);

/* PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for conv/linear weights and biases,
 * BatchNorm weight 1, bias 0, running mean 0, var 1; tensor i draws from rng_key(seed, i). */
void model_init_params(model *m, uint64_t seed);
/* Host arrays (model_num_params / model_buffer_size floats; either may be NULL) to the model and back. */
void model_upload(model *m, const float *params, const float *buffers);
void model_download(const model *m, float *params, float *buffers);
void model_set_grad_hook(model *m, grad_ready_fn fn, void *ctx);
void model_set_poll_hook(model *m, grad_poll_fn fn, void *ctx);

/* Training-mode forward + backward on n <= capacity normalised images x [n][1][28][28] (backend memory,
 * as are labels and ids). Dropout
 * element e of sample ids[i] in dropout layer L is kept iff
 * rng_uniform(rng_key(rng_key(dropout_key, ids[i]), L), e) >= p, so masks do not depend on the
 * batch split. ADDS the gradient of grad_scale * (sum of per-sample losses) to model_grads and
 * adds that sum to the model's loss sum (model_take_loss), on the device: a GPU does not wait. n may
 * be 0: only the hook calls happen. BatchNorm uses the batch statistics and updates the running stats
 * like PyTorch (momentum 0.1, unbiased running_var). */
void model_train_batch(model *m, const float *x, const uint8_t *labels, const uint64_t *ids, int n,
                       uint64_t dropout_key, float grad_scale);
/* The loss sum of the batches trained since the last call, then 0 (a GPU waits for its queue here). */
double model_take_loss(model *m);
/* model_train_batch, then model_take_loss: this batch's loss sum when nothing else was pending. For tests,
 * benchmarks and the PyTorch reference: the trainer queues steps and takes the loss once per log interval. */
double model_forward_backward(model *m, const float *x, const uint8_t *labels, const uint64_t *ids, int n,
                              uint64_t dropout_key, float grad_scale);

/* Eval-mode forward (no dropout, BatchNorm running stats) on n <= capacity samples: returns the sum
 * of per-sample losses and adds the number of correct argmax predictions to *correct. */
double model_evaluate(model *m, const float *x, const uint8_t *labels, int n, long *correct);
#endif
