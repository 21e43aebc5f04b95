/* Error checks for the CUDA translation units (nvcc, C++): every CUDA runtime, cuBLAS and NCCL call
 * is wrapped. A failure stops the job through die() with one line naming the call, the error,
 * file:line, and (added by die()) rank and host. die() calls MPI_Abort, so no peer is left waiting
 * in a collective. Exit status: 69 (EX_UNAVAILABLE) for conditions of the machine (out of memory,
 * no or busy device, driver, ECC, network), 78 (EX_CONFIG) for a binary without code for this GPU,
 * 70 (EX_SOFTWARE) for the rest (bugs).
 *
 *   CUDA_CHECK(cudaMalloc(&p, bytes));
 *   CUBLAS_CHECK(cublasSgemm(...));
 *   NCCL_CHECK(ncclGetUniqueId(&id));   // calls without a communicator; a call on a communicator
 *                                       // goes through nccl_comm.cu, which aborts it first
 */
#ifndef MNIST_CUDA_CHECK_H
#define MNIST_CUDA_CHECK_H
#include <stddef.h>
#include <sysexits.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "base/errors.h"

static inline int cuda_exit_code(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorECCUncorrectable:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        return EX_UNAVAILABLE;
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidKernelImage:
        return EX_CONFIG;
    default:
        return EX_SOFTWARE;
    }
}

static inline const char *cuda_hint(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return ": out of GPU memory (another process on this GPU? a smaller --batch-size or --test-batch-size?)";
    case cudaErrorDevicesUnavailable:
        return ": the GPU is busy (exclusive-process compute mode and another process holds it; one rank per GPU)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidKernelImage:
        return ": this binary has no code for this GPU; reconfigure with NVCC_GENCODE for its compute capability "
               "(nvidia-smi --query-gpu=compute_cap --format=csv) and rebuild";
    case cudaErrorECCUncorrectable:
    case cudaErrorHardwareStackError:
        return ": a hardware fault of this GPU; report the node to the administrators";
    default:
        return "";
    }
}

[[noreturn]] static inline void cuda_check_fail(cudaError_t e, const char *call, const char *file, int line)
{
    die_at(file, line, cuda_exit_code(e), "%s failed: %s (%s)%s", call, cudaGetErrorName(e), cudaGetErrorString(e),
           cuda_hint(e));
}

[[noreturn]] static inline void cublas_check_fail(cublasStatus_t s, const char *call, const char *file, int line)
{
    die_at(file, line,
           s == CUBLAS_STATUS_ALLOC_FAILED || s == CUBLAS_STATUS_NOT_INITIALIZED ? EX_UNAVAILABLE : EX_SOFTWARE,
           "%s failed: %s (%s)", call, cublasGetStatusName(s), cublasGetStatusString(s));
}

static inline int nccl_exit_code(ncclResult_t r)
{
    /* System and remote errors are the network or a peer; the rest are usage errors or bugs. */
    return r == ncclSystemError || r == ncclRemoteError || r == ncclUnhandledCudaError ? EX_UNAVAILABLE : EX_SOFTWARE;
}

[[noreturn]] static inline void nccl_check_fail(ncclResult_t r, const char *call, const char *file, int line)
{
    die_at(file, line, nccl_exit_code(r), "%s failed: %s (%s); rerun with NCCL_DEBUG=INFO to see why", call,
           ncclGetErrorString(r), ncclGetLastError(NULL));
}

#define CUDA_CHECK(call)                                          \
    do {                                                          \
        cudaError_t cuda_rc_ = (call);                            \
        if (cuda_rc_ != cudaSuccess)                              \
            cuda_check_fail(cuda_rc_, #call, __FILE__, __LINE__); \
    } while (0)

#define CUBLAS_CHECK(call)                                            \
    do {                                                              \
        cublasStatus_t cublas_rc_ = (call);                           \
        if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                      \
            cublas_check_fail(cublas_rc_, #call, __FILE__, __LINE__); \
    } while (0)

#define NCCL_CHECK(call)                                          \
    do {                                                          \
        ncclResult_t nccl_rc_ = (call);                           \
        if (nccl_rc_ != ncclSuccess)                              \
            nccl_check_fail(nccl_rc_, #call, __FILE__, __LINE__); \
    } while (0)
#endif
