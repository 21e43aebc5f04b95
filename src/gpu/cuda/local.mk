# cuda: the nvcc side of the GPU path (src/gpu/gpu.h), MPI-free: device and streams, cuBLAS GEMMs, the layers'
# kernels (their bodies shared with the CPU through src/gpu/kernels.h), NCCL, the profile's device clock.
if HAVE_CUDA
src_libmnistddp_a_SOURCES += src/gpu/cuda/device.cu src/gpu/cuda/nccl_comm.cu src/gpu/cuda/nccl_grad.cu src/gpu/cuda/comm_kernels.cu src/gpu/cuda/gemm_cublas.cu src/gpu/cuda/nn_cuda.cu src/gpu/cuda/net_head.cu src/gpu/cuda/pool_fused.cu src/gpu/cuda/conv_pool.cu src/gpu/cuda/step_scalars.cu src/gpu/cuda/profile_clock.cu src/gpu/cuda/cublas_dl.c \
	src/gpu/cuda/cublas_dl.h src/gpu/cuda/cuda_check.h src/gpu/cuda/comm_kernels.h src/gpu/cuda/globaltimer.h src/gpu/cuda/grid.h src/gpu/cuda/launch.h src/gpu/cuda/nccl_private.h src/gpu/cuda/net_head.h src/gpu/cuda/block_sum.h src/gpu/cuda/pool_fused.h src/gpu/cuda/conv_pool.h src/gpu/cuda/step_scalars.h src/gpu/cuda/profile_stamps.h
endif
# make dist ships every GPU file whatever this tree was configured with (tests/gpu/local.mk: their tests).
EXTRA_DIST += src/gpu/cuda/device.cu src/gpu/cuda/nccl_comm.cu src/gpu/cuda/nccl_grad.cu src/gpu/cuda/comm_kernels.cu src/gpu/cuda/gemm_cublas.cu src/gpu/cuda/nn_cuda.cu src/gpu/cuda/net_head.cu src/gpu/cuda/pool_fused.cu src/gpu/cuda/conv_pool.cu src/gpu/cuda/step_scalars.cu src/gpu/cuda/profile_clock.cu src/gpu/cuda/cublas_dl.c \
	src/gpu/cuda/cublas_dl.h src/gpu/cuda/cuda_check.h src/gpu/cuda/comm_kernels.h src/gpu/cuda/globaltimer.h src/gpu/cuda/grid.h src/gpu/cuda/launch.h src/gpu/cuda/nccl_private.h src/gpu/cuda/net_head.h src/gpu/cuda/block_sum.h src/gpu/cuda/pool_fused.h src/gpu/cuda/conv_pool.h src/gpu/cuda/step_scalars.h src/gpu/cuda/profile_stamps.h

# nvcc writes each object's header dependencies (-MMD, in the .cu.o rule) beside it.
-include src/gpu/cuda/device.d src/gpu/cuda/nccl_comm.d src/gpu/cuda/nccl_grad.d src/gpu/cuda/comm_kernels.d src/gpu/cuda/gemm_cublas.d src/gpu/cuda/nn_cuda.d src/gpu/cuda/net_head.d src/gpu/cuda/pool_fused.d src/gpu/cuda/conv_pool.d src/gpu/cuda/step_scalars.d src/gpu/cuda/profile_clock.d
CLEANFILES += src/gpu/cuda/*.d

# The GPU run kit (tools/gpu-kit/make-kit.sh): binaries, GPU test programs, the libraries they need but CUDA's and
# the driver's, Open MPI's plugins, the MNIST shards and tools/gpu-kit/run, at most 64 MiB. GPU build only.
EXTRA_DIST += tools/gpu-kit/make-kit.sh tools/gpu-kit/run
CLEANFILES += mnist_ddp-gpu-kit.tar.gz
.PHONY: gpu-kit
if HAVE_CUDA
gpu-kit: all tests/gpu/gpu_backend tests/gpu/mpi_gpu_device tests/gpu/mpi_gpu_allreduce tests/gpu/check_cublas_dl
	@test -d data/mnist || $(MAKE) $(AM_MAKEFLAGS) data
	PYTHON3=$(PYTHON3) $(SHELL) $(srcdir)/tools/gpu-kit/make-kit.sh $(abs_top_builddir) $(abs_top_srcdir) mnist_ddp-gpu-kit.tar.gz
else
gpu-kit:
	@echo "make gpu-kit needs the GPU build: ./configure --with-cuda" >&2; exit 1
endif
