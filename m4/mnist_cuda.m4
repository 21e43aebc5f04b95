# MNIST_CHECK_CUDA: optional GPU path (CUDA runtime + cuBLAS + NCCL).
# --with-cuda[=DIR] / --with-nccl[=DIR] given explicitly: anything missing is fatal.
# Not given: auto-detect (/usr/local/cuda, nvcc in PATH) and fall back to a CPU-only build.
# The GPU libraries only dlopen the driver (libcuda), so the same binary starts on nodes without one.
AC_DEFUN([MNIST_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the GPU path with the CUDA Toolkit in DIR (default: auto-detect /usr/local/cuda)])],
    [], [with_cuda=check])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [NCCL installation prefix (default: the CUDA Toolkit, then system paths)])],
    [], [with_nccl=check])
  AC_ARG_VAR([NVCC], [CUDA compiler (default: DIR/bin/nvcc)])
  AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc])
  AC_ARG_VAR([NVCC_GENCODE], [nvcc -gencode flags (default: sm_80, sm_90 and compute_90 PTX, accepted by CUDA 12 and 13)])
  AS_IF([test -z "$NVCC_GENCODE"],
    [NVCC_GENCODE="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])

  mnist_cuda=no
  mnist_cuda_summary="no (CPU-only build; use --with-cuda to require the GPU path)"
  mnist_nccl_summary="no"
  mnist_cuda_fail() {
    AS_IF([test "x$with_cuda" != xcheck || { test "x$with_nccl" != xcheck && test "x$with_nccl" != xno; }],
      [AC_MSG_ERROR([$[1]])],
      [AC_MSG_WARN([$[1]; building CPU-only])
       mnist_cuda_summary="no ($[1])"])
  }
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda], [yes|check], [cuda_dir=/usr/local/cuda], [cuda_dir=$with_cuda])
    AS_IF([test -z "$NVCC"], [AC_PATH_PROG([NVCC], [nvcc], [], [$cuda_dir/bin:$PATH])])
    AS_IF([test -n "$NVCC" && test "x$with_cuda" = xcheck && test ! -d "$cuda_dir"],
      [cuda_dir=`dirname "$NVCC"`; cuda_dir=`dirname "$cuda_dir"`])
    AS_IF([test -z "$NVCC"], [mnist_cuda_fail "nvcc not found in $cuda_dir/bin or PATH"], [
      AC_MSG_CHECKING([whether $NVCC accepts NVCC_GENCODE])
      cat > conftest.cu <<_MNIST_EOF
__global__ void k(float *x) { x[[threadIdx.x]] = 1.0f; }
int main(void) { k<<<1, 1>>>(0); return 0; }
_MNIST_EOF
      AS_IF([$NVCC $NVCC_GENCODE $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes]); mnist_nvcc_ok=yes],
        [AC_MSG_RESULT([no]); mnist_nvcc_ok=no])
      rm -f conftest.cu conftest.$OBJEXT
      AS_IF([test "x$mnist_nvcc_ok" = xno], [mnist_cuda_fail "$NVCC rejects NVCC_GENCODE='$NVCC_GENCODE'"], [
        for d in lib64 lib lib/x86_64-linux-gnu; do
          AS_IF([test -d "$cuda_dir/$d"], [cuda_libdir=$cuda_dir/$d; break])
        done
        CUDA_CFLAGS="-I$cuda_dir/include"
        CUDA_LIBS="-L$cuda_libdir -Wl,-rpath,$cuda_libdir -lcublas -lcudart -lstdc++"
        AS_CASE([$with_nccl], [yes|check], [nccl_dir=], [nccl_dir=$with_nccl])
        AS_IF([test -n "$nccl_dir"],
          [NCCL_CFLAGS="-I$nccl_dir/include"
           NCCL_LIBS="-L$nccl_dir/lib -Wl,-rpath,$nccl_dir/lib -lnccl"],
          [NCCL_CFLAGS=; NCCL_LIBS="-lnccl"])
        mnist_save_CPPFLAGS=$CPPFLAGS; mnist_save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS $NCCL_CFLAGS"; LIBS="$NCCL_LIBS $CUDA_LIBS $LIBS"
        AC_MSG_CHECKING([whether the CUDA runtime and cuBLAS link])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>
#include <cublas_v2.h>]], [[int n; cublasHandle_t h; cudaGetDeviceCount(&n); return cublasCreate(&h) != CUBLAS_STATUS_SUCCESS;]])],
          [AC_MSG_RESULT([yes]); mnist_cudart_ok=yes], [AC_MSG_RESULT([no]); mnist_cudart_ok=no])
        AC_MSG_CHECKING([whether NCCL links])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
            [[ncclUniqueId id; ncclComm_t c; ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER; cfg.blocking = 0;
              ncclGetUniqueId(&id); ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
              ncclResult_t a; ncclCommGetAsyncError(c, &a); ncclCommAbort(c);]])],
          [AC_MSG_RESULT([yes]); mnist_nccl_ok=yes], [AC_MSG_RESULT([no]); mnist_nccl_ok=no])
        CPPFLAGS=$mnist_save_CPPFLAGS; LIBS=$mnist_save_LIBS
        AS_IF([test "x$mnist_cudart_ok" = xno], [mnist_cuda_fail "CUDA runtime/cuBLAS do not link from $cuda_libdir"],
              [test "x$mnist_nccl_ok" = xno], [mnist_cuda_fail "NCCL (nccl.h, libnccl) not found; use --with-nccl=DIR"],
              [mnist_cuda=yes
               mnist_cuda_summary="yes ($cuda_dir, $NVCC_GENCODE)"
               mnist_nccl_summary="yes (${nccl_dir:-$cuda_dir or system})"])
      ])
    ])
  ])
  AS_IF([test "x$mnist_cuda" = xyes],
    [AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build the CUDA/NCCL GPU path])],
    [CUDA_CFLAGS=; CUDA_LIBS=; NCCL_CFLAGS=; NCCL_LIBS=])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mnist_cuda" = xyes])
  AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([NCCL_CFLAGS]) AC_SUBST([NCCL_LIBS])
])
