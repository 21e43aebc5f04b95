# `make data`: fetch and verify the MNIST IDX files (data/fetch-mnist, cached in $(MNIST_CACHE_DIR)),
# then convert them with mnist2h5 into $(MNIST_DATA_DIR): the training set in $(MNIST_TRAIN_SHARDS)
# shards (train-NNNNN-of-MMMMM.h5), the test set in one file (test-00000-of-00001.h5). Built once
# (a stamp file); only the build directory is written. Override on the command line, e.g.
#   make data MNIST_DATA_DIR=/scratch/mnist MNIST_TRAIN_SHARDS=8
# Offline: set MNIST_DIR to a directory holding the four IDX files (plain or .gz).
# (Plain '=' rather than '?=': automake only hoists '=' assignments above the rules that use them;
# command-line overrides work either way.)
MNIST_DATA_DIR = data/mnist
MNIST_TRAIN_SHARDS = 4
MNIST_CACHE_DIR = data/cache
# "-manifest": sets converted before mnist2h5 wrote manifests are converted again.
mnist_data_stamp = $(MNIST_DATA_DIR)/.stamp-train$(MNIST_TRAIN_SHARDS)-manifest

data: $(mnist_data_stamp)
.PHONY: data

$(mnist_data_stamp): $(srcdir)/data/fetch-mnist $(srcdir)/data/mnist.sha256 | src/mnist2h5$(EXEEXT)
	$(AM_V_GEN)$(SHELL) $(srcdir)/data/fetch-mnist '$(MNIST_CACHE_DIR)' && \
	$(MKDIR_P) '$(MNIST_DATA_DIR)' && rm -f '$(MNIST_DATA_DIR)'/.stamp-train* && \
	src/mnist2h5$(EXEEXT) --images '$(MNIST_CACHE_DIR)/train-images-idx3-ubyte' \
	  --labels '$(MNIST_CACHE_DIR)/train-labels-idx1-ubyte' --out '$(MNIST_DATA_DIR)' \
	  --shards '$(MNIST_TRAIN_SHARDS)' --prefix train && \
	src/mnist2h5$(EXEEXT) --images '$(MNIST_CACHE_DIR)/t10k-images-idx3-ubyte' \
	  --labels '$(MNIST_CACHE_DIR)/t10k-labels-idx1-ubyte' --out '$(MNIST_DATA_DIR)' \
	  --shards 1 --prefix test && \
	echo '$(MNIST_TRAIN_SHARDS)' >$@

# `make check` prepares the data before the tests run (tests find it through $MNIST_DATA).
check_DATA += $(mnist_data_stamp)
EXTRA_DIST += data/fetch-mnist data/mnist.sha256

# Clean only what this build made under the build directory: never $(MNIST_DIR), never a
# MNIST_DATA_DIR given on the command line. The verified IDX cache survives `make clean`
# (re-running is then offline) and goes with `make distclean`.
CLEANFILES += data/mnist/train-*-of-*.h5 data/mnist/test-*-of-*.h5 data/mnist/.stamp-train* \
	data/mnist/.train-*.tmp.* data/mnist/.test-*.tmp.* data/mnist/train.manifest data/mnist/test.manifest
clean-local: clean-local-mnist-data
clean-local-mnist-data:
	-test ! -d data/mnist || rmdir data/mnist 2>/dev/null || :
distclean-local: distclean-local-mnist-data
distclean-local-mnist-data:
	-rm -f data/cache/train-images-idx3-ubyte data/cache/train-labels-idx1-ubyte \
	  data/cache/t10k-images-idx3-ubyte data/cache/t10k-labels-idx1-ubyte data/cache/.*.part.*
	-test ! -d data/cache || rmdir data/cache 2>/dev/null || :
.PHONY: clean-local-mnist-data distclean-local-mnist-data
