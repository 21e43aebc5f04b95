# Data layer: IDX parsing, HDF5 shards (writer + reader), the distributed sampler, SHA-256,
# and the mnist2h5 converter. Included from the top-level Makefile.am (paths from the top dir).
src_libmnistddp_a_SOURCES += src/idx.c src/idx.h src/sha256.c src/sha256.h \
	src/shards.c src/shards.h src/sampler.c src/sampler.h

bin_PROGRAMS += src/mnist2h5
src_mnist2h5_SOURCES = src/mnist2h5.c
