/* The CPU backend with oneDNN's convolutions (--conv onednn): nn_cpu, except that conv_forward and
 * conv_backward (layers.h) run as oneDNN primitives instead of im2col + GEMM. Built when configure finds
 * oneDNN 2.x (--with-onednn); otherwise these stubs say it is absent. */
#ifndef MNIST_CONV_ONEDNN_H
#define MNIST_CONV_ONEDNN_H
#include "config.h"

#include "backend.h"

#ifdef HAVE_ONEDNN
/* The backend (one per process: its primitives are cached per shape and batch size). */
const nn_backend *nn_cpu_onednn(void);
/* "major.minor.patch" of the library loaded. */
const char *onednn_version(void);
#else
static inline const nn_backend *nn_cpu_onednn(void) { return NULL; }
static inline const char *onednn_version(void) { return NULL; }
#endif
#endif
