# gpu: the C side of the GPU path (gpu.h: device choice, cuBLAS, CUDA graphs, the NCCL communicator and the
# bucketed gradient all-reduce, implemented by cuda/ here). The pure decisions (gpu_plan.c) build and are unit-tested
# in every configuration; gpu_mpi.c, the MPI side (device agreement, the NCCL ID's broadcast), only with
# HAVE_CUDA; a CPU-only build gets gpu_none.c (gpu_available: no GPU).
# The GPU kernels' bodies (kernels.h, conv_pool_kernels.h, conv_pool_tf32.h): host + device functions that the
# CUDA files launch and the unit tests run on the CPU.
src_libmnistddp_a_SOURCES += src/gpu/gpu.h src/gpu/gpu_plan.c src/gpu/gpu_plan.h src/gpu/kernels.h \
	src/gpu/conv_pool_kernels.h src/gpu/conv_pool_tf32.h
if HAVE_CUDA
src_libmnistddp_a_SOURCES += src/gpu/gpu_mpi.c
else
src_libmnistddp_a_SOURCES += src/gpu/gpu_none.c
endif
# make dist ships both whatever this tree was configured with.
EXTRA_DIST += src/gpu/gpu_mpi.c src/gpu/gpu_none.c
