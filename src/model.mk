src_libmnistddp_a_SOURCES += src/backend.h src/ops.h src/kernels.h src/gemm.h src/gemm.c src/mnist.h src/layers.h src/layers.c \
	src/simd.h src/nn_cpu.h src/nn_cpu.c src/nchw16c.h src/nchw16c.c src/conv_cpu.h src/conv_cpu.c src/model.h src/model.c src/optim.h src/optim.c
# oneDNN's convolutions (--conv onednn), when configure found oneDNN; the header's stubs otherwise.
src_libmnistddp_a_SOURCES += src/conv_onednn.h
if HAVE_ONEDNN
src_libmnistddp_a_SOURCES += src/conv_onednn.c
endif
