# Data-layer tests: IDX parsing, HDF5 shards (round trips, layout, ranks x shards, bad inputs,
# writer atomicity), the distributed sampler, the mnist2h5 CLI and data/fetch-mnist (offline).
data_test_util = tests/data_testutil.c tests/data_testutil.h

check_PROGRAMS += tests/check_idx tests/check_shards tests/check_sampler
tests_check_idx_SOURCES = tests/check_idx.c $(data_test_util)
tests_check_idx_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_idx_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_shards_SOURCES = tests/check_shards.c $(data_test_util)
tests_check_shards_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_shards_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_sampler_SOURCES = tests/check_sampler.c
tests_check_sampler_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_sampler_LDADD = $(LDADD) $(CHECK_LIBS)

TESTS += tests/check_idx tests/check_shards tests/check_sampler tests/mnist2h5.sh tests/fetch-mnist.sh
EXTRA_DIST += tests/mnist2h5.sh tests/fetch-mnist.sh
