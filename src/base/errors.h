/* Fatal errors: one line naming program, rank, host, what went wrong and where, then an exit
 * status from <sysexits.h>. The statuses: 64 usage, 65 bad data, 66 missing input, 69 unavailable,
 * 70 internal, 71 system, 73 cannot create output, 74 I/O, 78 configuration / launch. Under MPI the job is
 * torn down with MPI_Abort, so no other rank is left waiting in a collective. */
#ifndef MNIST_ERRORS_H
#define MNIST_ERRORS_H
#include <stddef.h>
#include <sysexits.h>
/* For MPI_CHECK. The CUDA translation units include this header too but never call MPI, and nvcc does not
 * have MPI on its include path (see src/gpu/cuda/local.mk). */
#ifndef __CUDACC__
#include <mpi.h>
#endif

/* C11's _Noreturn, or C++'s attribute for the CUDA translation units, which link these C functions. */
#ifdef __cplusplus
#define MNIST_NORETURN [[noreturn]]
extern "C" {
#else
#define MNIST_NORETURN _Noreturn
#endif

/* How long MPI_Abort and MPI_Finalize may take on the way out before the process ends by itself. */
enum { ABORT_GRACE_S = 3, FINALIZE_GRACE_S = 10 };

/* Name printed in front of every message ("mnist_ddp", "mnist2h5"). */
void error_set_program(const char *name);

/* Local failure: print, then MPI_Abort (if MPI is running) or exit. */
MNIST_NORETURN void die_at(const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Failure every rank detects identically (options, a missing file all ranks see): rank 0 prints,
 * every rank finalises MPI and exits with the same code; no abort banner, no duplicate lines. */
MNIST_NORETURN void die_all_at(const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void warn_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* For test harnesses (tests/fuzz): die(), die_all() and exit_all() call hook(code) first, after the message
 * and before MPI is torn down; a hook that longjmps turns the fatal error into a return. NULL: none. */
void error_set_exit_hook(void (*hook)(int code));

#define die(code, ...)     die_at(__FILE__, __LINE__, (code), __VA_ARGS__)
#define die_all(code, ...) die_all_at(__FILE__, __LINE__, (code), __VA_ARGS__)
#define warn(...)          warn_at(__FILE__, __LINE__, __VA_ARGS__)

#define MPI_CHECK(call)                                         \
    do {                                                        \
        int mpi_rc_ = (call);                                   \
        if (mpi_rc_ != MPI_SUCCESS) {                           \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                \
            int mpi_len_ = 0;                                   \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);     \
            die(EX_SOFTWARE, "%s failed: %s", #call, mpi_msg_); \
        }                                                       \
    } while (0)

/* This process's rank in MPI_COMM_WORLD (0 before MPI_Init): the one way every layer knows it. */
int world_rank(void);
/* Finalise MPI if it is running, then exit: the clean way out for a decision all ranks share. */
MNIST_NORETURN void exit_all(int code);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Aligned for SIMD and cuBLAS-friendly host copies; free with free(). */
void *xmalloc_aligned(size_t n);
#ifdef __cplusplus
}
#endif
#endif
