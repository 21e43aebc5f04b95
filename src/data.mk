# Data layer: IDX parsing, HDF5 shards (names, reader, writer, on the HDF5 helpers that
# src/checkpoint.c shares too), the distributed sampler, SHA-256, and the mnist2h5 converter.
# Included from the top-level Makefile.am (paths from the top dir).
src_libmnistddp_a_SOURCES += src/idx.c src/idx.h src/sha256.c src/sha256.h src/sha256_blocks.h \
	src/shards.h src/shard_names.c src/shard_names.h src/shard_read.c \
	src/shard_write.c src/manifest.c src/manifest.h src/h5util.c src/h5util.h src/sampler.c src/sampler.h
if HAVE_SHA_NI
src_libmnistddp_a_SOURCES += src/sha256_shani.c
endif

bin_PROGRAMS += src/mnist2h5
src_mnist2h5_SOURCES = src/mnist2h5.c
