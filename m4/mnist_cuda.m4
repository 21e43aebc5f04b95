# MNIST_CHECK_CUDA: optional GPU path (CUDA runtime + cuBLAS + NCCL).
# --with-cuda[=DIR] / --with-nccl[=DIR] given explicitly: anything missing is fatal.
# Not given: auto-detect (/usr/local/cuda, nvcc in PATH) and fall back to a CPU-only build.
# The GPU libraries only dlopen the driver (libcuda), so the same binary starts on nodes without one.
# Run-time paths: every library directory is recorded resolved (pwd -P), never through a symlink such as
# /usr/local/cuda, which a node may point at another CUDA major version (libcudart.so.13 would be missing).

# MNIST_LIBDIR(VAR, LIB, DIRS...): VAR = the first of DIRS holding LIB (a shared library's file name),
# with symlinks resolved; empty when none does.
AC_DEFUN([MNIST_LIBDIR], [
  $1=
  for mnist_d in $3; do
    AS_IF([test -e "$mnist_d/$2"], [$1=`cd "$mnist_d" && pwd -P`; break])
  done
])

# MNIST_RPATH(DIR): -L and, unless DIR is one the loader searches anyway, -Wl,-rpath for DIR.
AC_DEFUN([MNIST_RPATH], [`case $1 in /lib|/lib64|/usr/lib|/usr/lib64|/usr/lib/*-linux-gnu) echo "-L$1" ;; *) echo "-L$1 -Wl,-rpath,$1" ;; esac`])

# MNIST_CUDA_DRIVER(CUDA_H): mnist_cuda_release ("13.0") and mnist_cuda_driver, the oldest Linux driver
# branch that runs this CUDA major version (minor-version compatibility). Source: NVIDIA's CUDA Toolkit
# release notes, table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
# Compatibility": CUDA 13.x >= 580, 12.x >= 525 (525.60.13), 11.x >= 450 (450.80.02).
AC_DEFUN([MNIST_CUDA_DRIVER], [
  mnist_v=`sed -n 's/^#define CUDA_VERSION \(@<:@0-9@:>@*\).*/\1/p' "$1" 2>/dev/null`
  AS_IF([test -n "$mnist_v"], [
    mnist_cuda_release="`expr $mnist_v / 1000`.`expr $mnist_v % 1000 / 10`"
    AS_CASE([`expr $mnist_v / 1000`], [11], [mnist_cuda_driver=450], [12], [mnist_cuda_driver=525],
      [13], [mnist_cuda_driver=580], [mnist_cuda_driver="(unknown to this configure: see NVIDIA's release notes)"])],
    [mnist_cuda_release=unknown; mnist_cuda_driver="(unknown)"])
])

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
        cuda_real=`cd "$cuda_dir" && pwd -P`
        MNIST_LIBDIR([cuda_libdir], [libcudart.so],
          ["$cuda_real/lib64" "$cuda_real/lib" "$cuda_real/targets/x86_64-linux/lib" "$cuda_real/lib/x86_64-linux-gnu"])
        AS_IF([test -z "$cuda_libdir"], [cuda_libdir=$cuda_real/lib64])
        CUDA_CFLAGS="-I$cuda_dir/include"
        # cuBLAS is not linked: src/gpu/cuda/cublas_dl.c opens it when the GPU path starts (its constructors would
        # cost every process, CPU runs included, about 0.5 s); the run path above finds it for dlopen too.
        CUDA_LIBS="MNIST_RPATH([$cuda_libdir]) -lcudart -lstdc++"
        MNIST_CUDA_DRIVER([$cuda_dir/include/cuda.h])
        AC_MSG_NOTICE([CUDA $mnist_cuda_release in $cuda_real needs an NVIDIA driver >= $mnist_cuda_driver on the GPU nodes (nvidia-smi shows theirs; an older one: build with the cluster's matching CUDA module)])
        # NCCL: --with-nccl=DIR, else beside the CUDA libraries, else the system's; lib64 as well as lib.
        AS_CASE([$with_nccl], [yes|check], [nccl_dir=], [nccl_dir=$with_nccl])
        AS_IF([test -n "$nccl_dir"],
          [MNIST_LIBDIR([nccl_libdir], [libnccl.so], ["$nccl_dir/lib64" "$nccl_dir/lib"])],
          [MNIST_LIBDIR([nccl_libdir], [libnccl.so],
             ["$cuda_libdir" /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib /usr/local/nccl/lib64 /usr/local/nccl/lib])])
        NCCL_CFLAGS=; NCCL_LIBS="-lnccl"
        AS_IF([test -n "$nccl_dir"], [NCCL_CFLAGS="-I$nccl_dir/include"],
              [test -n "$nccl_libdir" && test -f "$nccl_libdir/../include/nccl.h"],
              [NCCL_CFLAGS="-I`cd "$nccl_libdir/../include" && pwd -P`"])
        AS_IF([test -n "$nccl_libdir"], [NCCL_LIBS="MNIST_RPATH([$nccl_libdir]) -lnccl"])
        mnist_save_CPPFLAGS=$CPPFLAGS; mnist_save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS $NCCL_CFLAGS"; LIBS="$NCCL_LIBS -lcublas $CUDA_LIBS $LIBS"
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
        # dlopen (to open cuBLAS): in the C library from glibc 2.34, in libdl before (RHEL 8's 2.28).
        AC_SEARCH_LIBS([dlopen], [dl], [mnist_dl_ok=yes], [mnist_dl_ok=no])
        AS_CASE([$ac_cv_search_dlopen], [-l*], [CUDA_LIBS="$CUDA_LIBS $ac_cv_search_dlopen"])
        LIBS=$mnist_save_LIBS
        AS_IF([test "x$mnist_cudart_ok" = xno], [mnist_cuda_fail "CUDA runtime/cuBLAS do not link from $cuda_libdir"],
              [test "x$mnist_nccl_ok" = xno], [mnist_cuda_fail "NCCL (nccl.h, libnccl) not found; use --with-nccl=DIR"],
              [test "x$mnist_dl_ok" = xno], [mnist_cuda_fail "dlopen not found (to open cuBLAS at run time)"],
              [mnist_cuda=yes
               mnist_cuda_summary="yes ($cuda_real, CUDA $mnist_cuda_release: NVIDIA driver >= $mnist_cuda_driver, $NVCC_GENCODE)"
               mnist_nccl_summary="yes (${nccl_libdir:-the linker's default path})"])
      ])
    ])
  ])
  AS_IF([test "x$mnist_cuda" = xyes],
    [AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build the CUDA/NCCL GPU path])],
    [CUDA_CFLAGS=; CUDA_LIBS=; NCCL_CFLAGS=; NCCL_LIBS=])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mnist_cuda" = xyes])
  AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([NCCL_CFLAGS]) AC_SUBST([NCCL_LIBS])
])
