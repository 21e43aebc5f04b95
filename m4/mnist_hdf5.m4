# MNIST_CHECK_HDF5: HDF5 is required. Order: --with-hdf5=DIR, pkg-config (hdf5, hdf5-serial), h5cc -show.
AC_DEFUN([MNIST_CHECK_HDF5], [
  AC_ARG_WITH([hdf5],
    [AS_HELP_STRING([--with-hdf5=DIR], [HDF5 installation prefix (default: pkg-config, then h5cc)])],
    [], [with_hdf5=check])
  AS_CASE([$with_hdf5],
    [no], [AC_MSG_ERROR([HDF5 is required; --without-hdf5 is not supported])],
    [check|yes], [
      PKG_CHECK_MODULES([HDF5], [hdf5], [],
        [PKG_CHECK_MODULES([HDF5], [hdf5-serial], [], [
          AC_PATH_PROGS([H5CC], [h5cc h5pcc], [])
          AS_IF([test -n "$H5CC"], [
            mnist_h5show=`$H5CC -show 2>/dev/null`
            HDF5_CFLAGS=`echo "$mnist_h5show" | tr ' ' '\n' | grep '^-I' | tr '\n' ' '`
            HDF5_LIBS=`echo "$mnist_h5show" | tr ' ' '\n' | grep -E '^-L|^-l|\.so$|\.a$' | tr '\n' ' '`])])])],
    [HDF5_CFLAGS="-I$with_hdf5/include"
     HDF5_LIBS="-L$with_hdf5/lib -Wl,-rpath,$with_hdf5/lib -lhdf5"])
  mnist_save_CPPFLAGS=$CPPFLAGS; mnist_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $HDF5_CFLAGS"; LIBS="$HDF5_LIBS $LIBS"
  AC_MSG_CHECKING([whether HDF5 programs link])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]],
      [[hid_t f = H5Fopen("x", H5F_ACC_RDONLY, H5P_DEFAULT); H5Pset_fletcher32(H5P_DEFAULT); return f < 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([HDF5 not usable (CFLAGS '$HDF5_CFLAGS', LIBS '$HDF5_LIBS'): apt-get install libhdf5-dev, or --with-hdf5=DIR])])
  CPPFLAGS=$mnist_save_CPPFLAGS; LIBS=$mnist_save_LIBS
  AC_SUBST([HDF5_CFLAGS]) AC_SUBST([HDF5_LIBS])
  mnist_hdf5_summary="yes ($HDF5_LIBS)"
])
