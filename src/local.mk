# src/: one folder per layer, each including and calling only its own and lower layers' files, no cycles
# (tests/layers.py checks): base < data < comm < nn < nn/cpu < gpu < train < main.c; gpu/cuda/ is the nvcc
# side of the gpu layer. One static library holds everything but main(); programs and tests link it.
noinst_LIBRARIES = src/libmnistddp.a
src_libmnistddp_a_SOURCES =
include src/base/local.mk
include src/data/local.mk
include src/comm/local.mk
include src/nn/local.mk
include src/train/local.mk
bin_PROGRAMS += src/mnist_ddp
src_mnist_ddp_SOURCES = src/main.c
