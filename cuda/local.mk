# GPU path: device choice, NCCL communicator and bucketed gradient all-reduce (src/gpu.h).
# The pure decisions (src/gpu_plan.c) build and are unit-tested in every configuration; the CUDA
# translation units (nvcc, no MPI) and their MPI glue (cuda/gpu_host.c) only with HAVE_CUDA; a
# CPU-only build gets src/gpu_none.c (gpu_available/gpu_decide: no GPU).
src_libmnistddp_a_SOURCES += src/gpu.h src/gpu_plan.c src/gpu_plan.h
if HAVE_CUDA
src_libmnistddp_a_SOURCES += cuda/device.cu cuda/comm_nccl.cu cuda/gemm_cublas.cu cuda/layers.cu cuda/cuda_check.h \
	cuda/gpu_host.c
else
src_libmnistddp_a_SOURCES += src/gpu_none.c
endif
# make dist ships every GPU file whatever this tree was configured with.
EXTRA_DIST += cuda/device.cu cuda/comm_nccl.cu cuda/gemm_cublas.cu cuda/layers.cu cuda/cuda_check.h cuda/gpu_host.c src/gpu_none.c \
	tests/check_gpu_plan.c tests/check_gpu_mock.c tests/check_gpu_errors.c tests/gpu_mock.c tests/gpu_mock_stream.c \
	tests/gpu_mock.h \
	tests/gpu_mock_host.c tests/gpu-mock-host.sh tests/mpi_gpu_device.c tests/mpi_gpu_allreduce.c \
	tests/gpu_backend.c tests/gpu-train.sh tests/bench-gpu.sh

# nvcc writes each object's header dependencies (-MMD, in the .cu.o rule) beside it.
-include cuda/device.d cuda/comm_nccl.d cuda/gemm_cublas.d cuda/layers.d
CLEANFILES += cuda/*.d

# Unit tests of the pure decisions (no GPU, no MPI), in every configuration.
if HAVE_CHECK
check_PROGRAMS += tests/check_gpu_plan
TESTS += tests/check_gpu_plan
tests_check_gpu_plan_SOURCES = tests/check_gpu_plan.c
tests_check_gpu_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_gpu_plan_LDADD = $(LDADD) $(CHECK_LIBS)
endif

if HAVE_CUDA
# The CUDA translation units and their MPI glue against a simulated CUDA runtime, cuBLAS and NCCL
# (tests/gpu_mock*.c define the cuda*/cublas*/nccl* functions; libcudart and libnccl are not linked):
# control flow, stream/event ordering (race detector), deadlines, error and abort paths, device agreement
# and the bootstrap address, on machines without a GPU.
mock_sources = tests/gpu_mock.c tests/gpu_mock_stream.c tests/gpu_mock.h
mock_ldadd = src/libmnistddp.a $(HDF5_LIBS) $(BLAS_LIBS) -lm
check_PROGRAMS += tests/gpu_mock_host
tests_gpu_mock_host_SOURCES = tests/gpu_mock_host.c $(mock_sources)
tests_gpu_mock_host_LDADD = $(mock_ldadd)
TESTS += tests/gpu-mock-host.sh
if HAVE_CHECK
check_PROGRAMS += tests/check_gpu_mock tests/check_gpu_errors
TESTS += tests/check_gpu_mock tests/check_gpu_errors
tests_check_gpu_mock_SOURCES = tests/check_gpu_mock.c $(mock_sources)
tests_check_gpu_mock_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_gpu_mock_LDADD = $(mock_ldadd) $(CHECK_LIBS)
tests_check_gpu_errors_SOURCES = tests/check_gpu_errors.c $(mock_sources)
tests_check_gpu_errors_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_gpu_errors_LDADD = $(mock_ldadd) $(CHECK_LIBS)
endif

# On a GPU machine: 2 ranks each (tests/run-test runs mpi_* under mpirun); exit 77 (SKIP) with a
# one-line reason without a usable GPU (or, for the all-reduce, with fewer GPUs than ranks).
check_PROGRAMS += tests/mpi_gpu_device tests/mpi_gpu_allreduce
TESTS += tests/mpi_gpu_device tests/mpi_gpu_allreduce
tests_mpi_gpu_device_SOURCES = tests/mpi_gpu_device.c
tests_mpi_gpu_allreduce_SOURCES = tests/mpi_gpu_allreduce.c
# The CUDA backend against the CPU backend, entry by entry and through both models (one process: no
# mpi_ prefix); then training on the GPU: accuracy with 1 GPU and all of the node's, and the fp32 GPU run
# following the CPU run. Both skip (77) without a usable GPU.
check_PROGRAMS += tests/gpu_backend
TESTS += tests/gpu_backend tests/gpu-train.sh
tests_gpu_backend_SOURCES = tests/gpu_backend.c
endif

# The GPU path's tests alone (CI's --with-cuda build; a GPU node's first check). Without CUDA: none.
if HAVE_CUDA
gpu_tests = tests/gpu-mock-host.sh tests/mpi_gpu_device tests/mpi_gpu_allreduce tests/gpu_backend tests/gpu-train.sh
if HAVE_CHECK
gpu_tests += tests/check_gpu_mock tests/check_gpu_errors
endif
endif
.PHONY: check-gpu
check-gpu:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='tests/check_gpu_plan $(gpu_tests)' check_DATA=

# GPU figures (1 GPU, all GPUs of the node, each --precision); not part of make check. Without a GPU it
# says so and succeeds.
.PHONY: bench-gpu
bench-gpu: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench-gpu.sh

