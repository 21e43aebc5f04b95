# nn: the models and optimizers over a backend table (backend.h), the layers built from it, and the
# element functions written once for host and device (ops.h; the GPU kernels' bodies over them are in gpu/).
src_libmnistddp_a_SOURCES += src/nn/backend.h src/nn/ops.h src/nn/head.h src/nn/conv_stack.h \
	src/nn/layers.c src/nn/layers.h src/nn/model.c src/nn/model.h src/nn/model_parts.h \
	src/nn/networks.c src/nn/optim.c src/nn/optim.h

# nn/cpu: the CPU backend: CBLAS GEMMs (and OpenBLAS's kernel choice) and the own AVX-512 ones (cpu_isa.h: which ISA), the im2col and
# oneDNN convolutions, the blocked-layout helpers. oneDNN's file only when configure found oneDNN, the own
# kernels only where the compiler builds them; the headers' stubs otherwise.
src_libmnistddp_a_SOURCES += src/nn/cpu/gemm.c src/nn/cpu/gemm.h src/nn/cpu/blas_core.c src/nn/cpu/blas_core.h \
	src/nn/cpu/nn_cpu.c src/nn/cpu/nn_cpu.h src/nn/cpu/conv_cpu.c src/nn/cpu/conv_cpu.h \
	src/nn/cpu/nchw16c.c src/nn/cpu/nchw16c.h src/nn/cpu/simd.h src/nn/cpu/conv_onednn.h \
	src/nn/cpu/conv_choice.c src/nn/cpu/conv_choice.h src/nn/cpu/gemm_avx512.h src/nn/cpu/cpu_isa.h
if HAVE_AVX512_KERNELS
src_libmnistddp_a_SOURCES += src/nn/cpu/gemm_avx512.c src/nn/cpu/cpu_isa.c
endif
# The own convolution kernels and their stack (net's fast path) in every build: they need no oneDNN.
src_libmnistddp_a_SOURCES += src/nn/cpu/wino43.h src/nn/cpu/wino43_pool.h src/nn/cpu/conv1_direct.h \
	src/nn/cpu/wino43_stack.h src/nn/cpu/wino43_kernels.h src/nn/cpu/wino43_v16.h src/nn/cpu/v16_avx512.h \
	src/nn/cpu/v16_avx2.h src/nn/cpu/conv1_direct_v16.h
if HAVE_AVX512_KERNELS
src_libmnistddp_a_SOURCES += src/nn/cpu/wino43.c src/nn/cpu/wino43_pool.c src/nn/cpu/conv1_direct.c \
	src/nn/cpu/wino43_stack.c src/nn/cpu/wino43_avx512.c src/nn/cpu/wino43_avx2.c \
	src/nn/cpu/conv1_direct_avx512.c src/nn/cpu/conv1_direct_avx2.c
else
src_libmnistddp_a_SOURCES += src/nn/cpu/avx512_none.c
endif
if HAVE_ONEDNN
src_libmnistddp_a_SOURCES += src/nn/cpu/conv_onednn.c src/nn/cpu/onednn_arg.c src/nn/cpu/onednn_arg.h
endif
