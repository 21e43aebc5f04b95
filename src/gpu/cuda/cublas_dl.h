/* cuBLAS opened at run time (src/gpu/cuda/cublas_dl.c): the GPU path's cuBLAS calls load the library on first use. */
#ifndef MNIST_CUBLAS_DL_H
#define MNIST_CUBLAS_DL_H

/* Opens cuBLAS from LIB (NULL: libcublas.so.<the major version built against>, searched as the loader does) and
 * resolves the functions the GPU path calls; 1 if it did. Only the first call of a process opens anything: later
 * ones return its result. When it fails, every cuBLAS call returns CUBLAS_STATUS_NOT_INITIALIZED and
 * cublasGetStatusString says why (the library and dlerror's reason, or the function it lacks). */
int cublas_dl_open(const char *lib);

#endif
