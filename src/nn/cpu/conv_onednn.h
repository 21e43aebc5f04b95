/* The CPU backend with oneDNN's convolutions (--conv onednn, winograd, wino43): nn_cpu, except that conv_forward and
 * conv_backward (layers.h) of layers with more than one input channel run as oneDNN primitives (the others
 * as nn_cpu's). Built when configure finds oneDNN 2.x (--with-onednn); otherwise these stubs say it is
 * absent. */
#ifndef MNIST_CONV_ONEDNN_H
#define MNIST_CONV_ONEDNN_H
#include "config.h"

#include "nn/backend.h"

/* nn_cpu_onednn's algorithms: oneDNN's direct convolutions; its Winograd F(4,3) where it implements it (3x3
 * kernels, CPUs with AVX-512), else direct; the same with wino43.h's forward where it fits (--conv wino43). */
enum { WINO_NONE, WINO_ONEDNN, WINO_OWN };

#ifdef HAVE_ONEDNN
/* The backend for winograd, one of the enum (one per algorithm and process: its primitives are cached per
 * shape and batch size). */
const nn_backend *nn_cpu_onednn(int winograd);
/* Whether this CPU has oneDNN's Winograd convolutions. */
int onednn_has_winograd(void);
/* "major.minor.patch" of the library loaded. */
const char *onednn_version(void);
#else
static inline const nn_backend *nn_cpu_onednn(int winograd)
{
    (void)winograd;
    return NULL;
}
static inline int onednn_has_winograd(void) { return 0; }
static inline const char *onednn_version(void) { return "absent"; } /* never printed: no backend uses it */
#endif
#endif
