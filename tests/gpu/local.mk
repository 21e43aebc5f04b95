# The GPU path's tests (GPU build only). All of them build and run without a GPU but the last group.
# make dist ships them whatever this tree was configured with.
EXTRA_DIST += tests/gpu/check_gpu_mock.c tests/gpu/check_gpu_errors.c tests/gpu/check_gpu_graph.c tests/gpu/gpu_mock.c tests/gpu/gpu_mock_lt.c \
	tests/gpu/gpu_mock_stream.c tests/gpu/gpu_mock_graph.c tests/gpu/gpu_mock.h tests/gpu/mock_comm.h tests/gpu/gpu_mock_host.c \
	tests/gpu/gpu-mock-host.sh \
	tests/gpu/mpi_gpu_device.c tests/gpu/mpi_gpu_allreduce.c tests/gpu/gpu_backend.c tests/gpu/gpu-train.sh tests/gpu/gpu-proxy.sh \
	tests/gpu/gpu_backend_models.c tests/gpu/gpu_backend_conv2.c tests/gpu/gpu_backend_util.c tests/gpu/gpu_backend.h \
	tests/gpu/gpu_mock_steps.c tests/gpu/gpu_mock_main.c tests/gpu/gpu-mock-steps.sh tests/gpu/gpu-mock-graph.sh tests/gpu/gpu-rpath.sh \
	tests/gpu/gpu-mock-early.sh tests/gpu/gpu-kit.sh tests/gpu/gpu-mock-bench.sh tests/gpu/check_cublas_dl.c \
	tests/gpu/gpu-mock-grid.sh tests/gpu/launch-shapes.tsv

if HAVE_CUDA
# The CUDA translation units and their MPI glue against a simulated CUDA runtime, cuBLAS and NCCL
# (tests/gpu/gpu_mock*.c define the cuda*/cublas*/nccl* functions; libcudart and libnccl are not linked):
# control flow, stream/event ordering (race detector), deadlines, error and abort paths, device agreement
# and the bootstrap address, on machines without a GPU.
mock_sources = tests/gpu/gpu_mock.c tests/gpu/gpu_mock_lt.c tests/gpu/gpu_mock_stream.c tests/gpu/gpu_mock_graph.c tests/gpu/gpu_mock_steps.c tests/gpu/gpu_mock.h \
	tests/gpu/mock_comm.h
# The kernels' host stubs (layers.o, comm_nccl.o) are C++: -lstdc++, which CUDA_LIBS brings elsewhere.
mock_ldadd = src/libmnistddp.a $(HDF5_LIBS) $(CRYPTO_LIBS) $(ONEDNN_LIBS) $(BLAS_LIBS) -lm -lstdc++
check_PROGRAMS += tests/gpu/gpu_mock_host
tests_gpu_gpu_mock_host_SOURCES = tests/gpu/gpu_mock_host.c $(mock_sources)
tests_gpu_gpu_mock_host_LDADD = $(mock_ldadd)
TESTS += tests/gpu/gpu-mock-host.sh
# mnist_ddp's own main and trainer on the simulation: launches, host waits and allocations per step.
check_PROGRAMS += tests/gpu/gpu_mock_train
tests_gpu_gpu_mock_train_SOURCES = src/main.c tests/gpu/gpu_mock_main.c $(mock_sources)
tests_gpu_gpu_mock_train_LDADD = $(mock_ldadd)
# MOCK_NO_STEP_SCALARS=1 takes the backend's step_scalars away (tests/gpu/gpu_mock_main.c).
tests_gpu_gpu_mock_train_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=nn_cuda
TESTS += tests/gpu/gpu-mock-steps.sh
# The step as a CUDA graph: the same results as eager, one graph launch per step, the fallbacks.
TESTS += tests/gpu/gpu-mock-graph.sh
# Each step kernel fills the GPU's SMs or tests/gpu/launch-shapes.tsv says why not.
TESTS += tests/gpu/gpu-mock-grid.sh
# The GPU performance report's scripts end to end on the simulation (make gpu-report, the kit's ./run --perf).
TESTS += tests/gpu/gpu-mock-bench.sh
# The device bound before MPI_Init from the launcher's local rank, and MPI's node-local rank agreeing.
TESTS += tests/gpu/gpu-mock-early.sh
# The binary's run-time library path: resolved directories, the CUDA and NCCL libraries found without LD_LIBRARY_PATH.
TESTS += tests/gpu/gpu-rpath.sh
# The GPU run kit runs with nothing but itself and the C library (chroot), as far as the CPU allows.
TESTS += tests/gpu/gpu-kit.sh
if HAVE_CHECK
check_PROGRAMS += tests/gpu/check_gpu_mock tests/gpu/check_gpu_errors tests/gpu/check_gpu_graph
TESTS += tests/gpu/check_gpu_mock tests/gpu/check_gpu_errors tests/gpu/check_gpu_graph
tests_gpu_check_gpu_mock_SOURCES = tests/gpu/check_gpu_mock.c $(mock_sources)
tests_gpu_check_gpu_mock_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_gpu_mock_LDADD = $(mock_ldadd) $(CHECK_LIBS)
tests_gpu_check_gpu_errors_SOURCES = tests/gpu/check_gpu_errors.c $(mock_sources)
tests_gpu_check_gpu_errors_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_gpu_errors_LDADD = $(mock_ldadd) $(CHECK_LIBS)
# The simulated CUDA graphs: capture, replay, capture errors.
tests_gpu_check_gpu_graph_SOURCES = tests/gpu/check_gpu_graph.c $(mock_sources)
tests_gpu_check_gpu_graph_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_gpu_graph_LDADD = $(mock_ldadd) $(CHECK_LIBS)
# cuBLAS opened at run time (src/gpu/cuda/cublas_dl.c): the real library, and one missing or wrong. No GPU needed.
check_PROGRAMS += tests/gpu/check_cublas_dl
TESTS += tests/gpu/check_cublas_dl
tests_gpu_check_cublas_dl_SOURCES = tests/gpu/check_cublas_dl.c
tests_gpu_check_cublas_dl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_gpu_check_cublas_dl_LDADD = src/libmnistddp.a $(CUDA_LIBS) $(CHECK_LIBS)
endif

# On a GPU machine: 2 ranks each (tests/run-test runs mpi_* under mpirun); exit 77 (SKIP) with a
# one-line reason without a usable GPU (or, for the all-reduce, with fewer GPUs than ranks).
check_PROGRAMS += tests/gpu/mpi_gpu_device tests/gpu/mpi_gpu_allreduce
TESTS += tests/gpu/mpi_gpu_device tests/gpu/mpi_gpu_allreduce
tests_gpu_mpi_gpu_device_SOURCES = tests/gpu/mpi_gpu_device.c
tests_gpu_mpi_gpu_allreduce_SOURCES = tests/gpu/mpi_gpu_allreduce.c
# The CUDA backend against the CPU backend, entry by entry and through both models (one process: no
# mpi_ prefix); then training on the GPU: accuracy with 1 GPU and all of the node's, and the fp32 GPU run
# following the CPU run. Both skip (77) without a usable GPU.
check_PROGRAMS += tests/gpu/gpu_backend
TESTS += tests/gpu/gpu_backend tests/gpu/gpu-train.sh
# One GPU standing for eight: the communication proxy (skips without a usable GPU).
TESTS += tests/gpu/gpu-proxy.sh
tests_gpu_gpu_backend_SOURCES = tests/gpu/gpu_backend.c tests/gpu/gpu_backend_models.c tests/gpu/gpu_backend_conv2.c tests/gpu/gpu_backend_util.c \
	tests/gpu/gpu_backend.h
endif

# The GPU path's tests alone (CI's --with-cuda build; a GPU node's first check). Without CUDA: none.
if HAVE_CUDA
gpu_tests = tests/gpu/gpu-mock-host.sh tests/gpu/gpu-mock-steps.sh tests/gpu/gpu-mock-graph.sh tests/gpu/gpu-mock-bench.sh \
	tests/gpu/gpu-mock-early.sh tests/gpu/gpu-rpath.sh \
	tests/gpu/gpu-kit.sh tests/gpu/mpi_gpu_device tests/gpu/mpi_gpu_allreduce tests/gpu/gpu_backend \
	tests/gpu/gpu-train.sh tests/gpu/gpu-proxy.sh
if HAVE_CHECK
gpu_tests += tests/gpu/check_gpu_mock tests/gpu/check_gpu_errors tests/gpu/check_gpu_graph tests/gpu/check_cublas_dl
endif
endif
.PHONY: check-gpu
# The MNIST shards first: the simulated runs, the kit and the GPU training read them.
check-gpu:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='tests/unit/check_gpu_plan $(gpu_tests)' check_DATA='$(mnist_data_stamp)'
