# MNIST_PROG_MPICC: use mpicc as CC unless the user set CC (then CC must find mpi.h itself).
AC_DEFUN([MNIST_PROG_MPICC], [
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper (default: mpicc)])
  AS_IF([test -z "$CC"], [
    AC_CHECK_PROGS([MPICC], [mpicc], [])
    AS_IF([test -n "$MPICC"], [CC=$MPICC])
  ])
])

# MNIST_CHECK_MPI: MPI is required; prove a program using it links.
AC_DEFUN([MNIST_CHECK_MPI], [
  AC_MSG_CHECKING([whether $CC compiles and links MPI programs])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
      [[int p; MPI_Init_thread(0, 0, MPI_THREAD_FUNNELED, &p);
        MPI_Comm c; MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
        MPI_Request r; MPI_Iallreduce(MPI_IN_PLACE, &p, 1, MPI_INT, MPI_SUM, c, &r);
        MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([MPI 3 is required: install Open MPI (apt-get install libopenmpi-dev openmpi-bin) or set CC/MPICC to your MPI compiler wrapper])])
  AC_PATH_PROGS([MPIEXEC], [mpirun mpiexec], [mpirun])
  mnist_mpi_summary="yes ($MPIEXEC)"
])
