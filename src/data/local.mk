# data: MNIST's IDX files, HDF5 shards (names, reader, writer, manifests, on the HDF5 helpers that
# src/train/model_file.c shares too), the distributed sampler, and the mnist2h5 converter.
src_libmnistddp_a_SOURCES += src/data/mnist.h src/data/idx.c src/data/idx.h src/data/shards.h \
	src/data/shard_names.c src/data/shard_names.h src/data/shard_read.c src/data/shard_write.c \
	src/data/manifest.c src/data/manifest.h src/data/h5util.c src/data/h5util.h src/data/sampler.c src/data/sampler.h

bin_PROGRAMS += src/mnist2h5
src_mnist2h5_SOURCES = src/data/mnist2h5.c
