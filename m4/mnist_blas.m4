# MNIST_CHECK_BLAS: a CBLAS is required. --with-blas=openblas (default, via pkg-config),
# or --with-blas="-L/path -lmyblas" with BLAS_CFLAGS for its cblas.h.
AC_DEFUN([MNIST_CHECK_BLAS], [
  AC_ARG_WITH([blas],
    [AS_HELP_STRING([--with-blas=LIB], [CBLAS to link: openblas (default) or linker flags such as "-lblis"])],
    [], [with_blas=openblas])
  AC_ARG_VAR([BLAS_CFLAGS], [C flags to find cblas.h])
  AC_ARG_VAR([BLAS_LIBS], [linker flags for the CBLAS library])
  AS_CASE([$with_blas],
    [no], [AC_MSG_ERROR([a CBLAS is required; --without-blas is not supported])],
    [openblas|yes], [PKG_CHECK_MODULES([BLAS], [openblas], [],
                       [AS_IF([test -z "$BLAS_LIBS"], [BLAS_LIBS="-lopenblas"])])],
    [AS_IF([test -z "$BLAS_LIBS"], [BLAS_LIBS="$with_blas"])])
  mnist_save_CPPFLAGS=$CPPFLAGS; mnist_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $BLAS_CFLAGS"; LIBS="$BLAS_LIBS $LIBS"
  AC_MSG_CHECKING([for cblas_sgemm])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
      [[float a = 1, b = 1, c = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([no usable CBLAS (BLAS_CFLAGS '$BLAS_CFLAGS', BLAS_LIBS '$BLAS_LIBS'): apt-get install libopenblas-dev, or --with-blas=...])])
  AC_CHECK_FUNCS([openblas_set_num_threads openblas_get_corename])
  CPPFLAGS=$mnist_save_CPPFLAGS; LIBS=$mnist_save_LIBS
  mnist_blas_summary="yes ($BLAS_LIBS)"
])
