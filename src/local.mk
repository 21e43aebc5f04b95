# src/: one folder per layer, each including only its own and lower layers' headers (tests/layers.sh checks):
#   base < data < comm < nn < nn/cpu < gpu < train < main.c
# cuda/ holds the nvcc side of gpu/. One static library holds everything but main(); programs and tests link it.
noinst_LIBRARIES = src/libmnistddp.a
src_libmnistddp_a_SOURCES =
include src/base/local.mk
include src/data/local.mk
include src/comm/local.mk
include src/nn/local.mk
include src/train/local.mk
bin_PROGRAMS += src/mnist_ddp
src_mnist_ddp_SOURCES = src/main.c
