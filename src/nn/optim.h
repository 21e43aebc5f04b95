/* Optimizers with exactly torch.optim.Adadelta / torch.optim.SGD (dampening 0, no Nesterov)
 * semantics, over the model's flat parameter and gradient buffers. */
#ifndef MNIST_OPTIM_H
#define MNIST_OPTIM_H
#include <stddef.h>

#include "nn/backend.h"

typedef enum { OPTIM_ADADELTA, OPTIM_SGD, OPTIM_KINDS } optim_kind;
/* Their names in options, checkpoints and messages, in optim_kind's order; NULL-terminated. */
extern const char *const optim_kind_names[];
/* PyTorch defaults: rho 0.9, eps 1e-6 (Adadelta); momentum and weight_decay 0. */
typedef struct {
    optim_kind kind;
    float rho, eps, momentum, weight_decay;
} optim_cfg;
typedef struct optim optim;

/* n = number of parameters; the state starts at zero, as in PyTorch. State, params and grads are in the
 * backend's memory (nn_cpu, nn_cuda). */
optim *optim_create_on(const nn_backend *be, const optim_cfg *cfg, size_t n);
void optim_step(optim *o, float *params, const float *grads, float lr);
/* optim_step, then grads zeroed (PyTorch's zero_grad before the next step) in the same pass. */
void optim_step_clear(optim *o, float *params, float *grads, float lr);
/* Flat state (backend memory) for checkpoints: Adadelta square_avg then acc_delta (2n floats); SGD the momentum
 * buffer (n floats, 0 without momentum). */
float *optim_state(optim *o, size_t *count);
/* Names of the n-float parts of that state as torch.optim's state_dict calls them ("square_avg", "acc_delta";
 * "momentum_buffer"); returns how many (count / n). */
int optim_state_parts(const optim *o, const char *const **names);
void optim_free(optim *o);
#endif
