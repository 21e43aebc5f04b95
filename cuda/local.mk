# cuda: the nvcc side of the GPU path (src/gpu/gpu.h), MPI-free: device and streams, cuBLAS GEMMs, the layers'
# kernels (their bodies shared with the CPU through src/nn/kernels.h), NCCL, the profile's device clock.
if HAVE_CUDA
src_libmnistddp_a_SOURCES += cuda/device.cu cuda/comm_nccl.cu cuda/grad_comm_nccl.cu cuda/comm_kernels.cu cuda/gemm_cublas.cu cuda/layers.cu cuda/net_head.cu cuda/pool_fused.cu cuda/conv_pool.cu cuda/cublas_dl.c \
	cuda/cublas_dl.h cuda/cuda_check.h cuda/comm_kernels.h cuda/grid.h cuda/launch.h cuda/nccl_comm.h cuda/net_head.h cuda/block_sum.h cuda/pool_fused.h cuda/conv_pool.h
endif
# make dist ships every GPU file whatever this tree was configured with (tests/gpu/local.mk: their tests).
EXTRA_DIST += cuda/device.cu cuda/comm_nccl.cu cuda/grad_comm_nccl.cu cuda/comm_kernels.cu cuda/gemm_cublas.cu cuda/layers.cu cuda/net_head.cu cuda/pool_fused.cu cuda/conv_pool.cu cuda/cublas_dl.c \
	cuda/cublas_dl.h cuda/cuda_check.h cuda/comm_kernels.h cuda/grid.h cuda/launch.h cuda/nccl_comm.h cuda/net_head.h cuda/block_sum.h cuda/pool_fused.h cuda/conv_pool.h

# nvcc writes each object's header dependencies (-MMD, in the .cu.o rule) beside it.
-include cuda/device.d cuda/comm_nccl.d cuda/grad_comm_nccl.d cuda/comm_kernels.d cuda/gemm_cublas.d cuda/layers.d cuda/net_head.d cuda/pool_fused.d cuda/conv_pool.d
CLEANFILES += cuda/*.d

# The GPU run kit (cuda/kit/make-kit.sh): binaries, GPU test programs, the libraries they need but CUDA's and
# the driver's, Open MPI's plugins, the MNIST shards and cuda/kit/run, at most 64 MiB. GPU build only.
EXTRA_DIST += cuda/kit/make-kit.sh cuda/kit/run
CLEANFILES += mnist_ddp-gpu-kit.tar.gz
.PHONY: gpu-kit
if HAVE_CUDA
gpu-kit: all tests/gpu/gpu_backend tests/gpu/mpi_gpu_device tests/gpu/mpi_gpu_allreduce tests/gpu/check_cublas_dl
	@test -d data/mnist || $(MAKE) $(AM_MAKEFLAGS) data
	PYTHON3=$(PYTHON3) $(SHELL) $(srcdir)/cuda/kit/make-kit.sh $(abs_top_builddir) $(abs_top_srcdir) mnist_ddp-gpu-kit.tar.gz
else
gpu-kit:
	@echo "make gpu-kit needs the GPU build: ./configure --with-cuda" >&2; exit 1
endif
