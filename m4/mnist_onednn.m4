# MNIST_CHECK_ONEDNN: oneDNN 2.x (Debian's libdnnl-dev) for the CPU path's convolutions. Default: used when
# found; --with-onednn (or =DIR, its prefix) fails when it is missing; --without-onednn leaves it out. oneDNN 3
# dropped the operation descriptors this code uses, so the check links one of them.
AC_DEFUN([MNIST_CHECK_ONEDNN], [
  AC_ARG_WITH([onednn],
    [AS_HELP_STRING([--with-onednn@<:@=DIR@:>@], [oneDNN 2.x convolutions on the CPU (default: when found)])],
    [], [with_onednn=check])
  AC_ARG_VAR([ONEDNN_CFLAGS], [C flags to find dnnl.h])
  AC_ARG_VAR([ONEDNN_LIBS], [linker flags for oneDNN])
  mnist_onednn=no
  AS_IF([test "x$with_onednn" != xno], [
    AS_CASE([$with_onednn], [yes|check], [],
      [mnist_onednn_lib=$with_onednn/lib
       AS_IF([test -d "$with_onednn/lib64"], [mnist_onednn_lib=$with_onednn/lib64])
       AS_IF([test -z "$ONEDNN_CFLAGS"], [ONEDNN_CFLAGS="-I$with_onednn/include"])
       AS_IF([test -z "$ONEDNN_LIBS"], [ONEDNN_LIBS="-L$mnist_onednn_lib -Wl,-rpath,$mnist_onednn_lib"])])
    AS_CASE([" $ONEDNN_LIBS "], [*" -ldnnl "*], [], [ONEDNN_LIBS="$ONEDNN_LIBS -ldnnl"])
    mnist_save_CPPFLAGS=$CPPFLAGS; mnist_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $ONEDNN_CFLAGS"; LIBS="$ONEDNN_LIBS $LIBS"
    AC_MSG_CHECKING([for oneDNN 2.x])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <dnnl.h>]],
        [[dnnl_convolution_desc_t d;
          return (int)dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct,
                                                        0, 0, 0, 0, 0, 0, 0);]])],
      [mnist_onednn=yes], [])
    AC_MSG_RESULT([$mnist_onednn])
    CPPFLAGS=$mnist_save_CPPFLAGS; LIBS=$mnist_save_LIBS
    AS_IF([test $mnist_onednn = no && test "x$with_onednn" != xcheck],
      [AC_MSG_ERROR([--with-onednn: no usable oneDNN 2.x (ONEDNN_CFLAGS '$ONEDNN_CFLAGS', ONEDNN_LIBS '$ONEDNN_LIBS'): apt-get install libdnnl-dev, or --without-onednn])])
  ])
  AS_IF([test $mnist_onednn = yes],
    [AC_DEFINE([HAVE_ONEDNN], [1], [Define to 1 for oneDNN convolutions on the CPU])
     mnist_onednn_summary="yes ($ONEDNN_LIBS)"],
    [ONEDNN_CFLAGS= ONEDNN_LIBS= mnist_onednn_summary="no"])
  AM_CONDITIONAL([HAVE_ONEDNN], [test $mnist_onednn = yes])
  # The project's own kernels (wino43, conv1_direct, their stack, with or without oneDNN; gemm_avx512 beside BLAS) are
  # AVX-512 intrinsics under a target attribute, chosen at run time: any x86-64 compiler builds them; elsewhere
  # avx512_none.c and gemm_avx512.h's stubs stand in. (mnist_cv_avx512_kernels=no ./configure builds the
  # stand-ins on x86-64 too.)
  AC_CACHE_CHECK([whether the compiler builds AVX-512 kernels], [mnist_cv_avx512_kernels],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <immintrin.h>
__attribute__((target("avx512f,fma"))) static __m512 f(__m512 a) { return _mm512_fmadd_ps(a, a, a); }]],
        [[(void)f;]])], [mnist_cv_avx512_kernels=yes], [mnist_cv_avx512_kernels=no])])
  AS_IF([test $mnist_cv_avx512_kernels = yes],
    [AC_DEFINE([HAVE_AVX512_KERNELS], [1], [Define to 1 to build the own AVX-512 kernels (chosen at run time)])])
  AS_IF([test $mnist_cv_avx512_kernels = yes],
    [mnist_onednn_summary="$mnist_onednn_summary; own Winograd and AVX-512/AVX2 kernels (net's --conv auto)"],
    [mnist_onednn_summary="$mnist_onednn_summary; no own kernels (x86-64 only): im2col + GEMM without oneDNN"])
  AM_CONDITIONAL([HAVE_AVX512_KERNELS], [test "x$mnist_cv_avx512_kernels" = xyes])
])
