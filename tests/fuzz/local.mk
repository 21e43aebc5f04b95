# Fuzzing: libFuzzer harnesses (clang) for the IDX parser, the shard reader, the model and checkpoint readers
# and the option parser. 'make fuzz' builds them (tests/fuzz/fuzz.mk) and runs each for FUZZ_SECONDS on its
# seed corpus (tests/fuzz/corpus/<harness>); not part of make check. See tests/fuzz/run.sh.
FUZZ_SECONDS = 60
FUZZ_CLANG = clang
FUZZ_HARNESSES = idx shard model options
fuzz_vars = srcdir='$(srcdir)' FUZZ_CLANG='$(FUZZ_CLANG)' \
	MPICC='$(MPICC)' HDF5_CFLAGS='$(HDF5_CFLAGS)' HDF5_LIBS='$(HDF5_LIBS)' CRYPTO_CFLAGS='$(CRYPTO_CFLAGS)' CRYPTO_LIBS='$(CRYPTO_LIBS)' BLAS_CFLAGS='$(BLAS_CFLAGS)' \
	BLAS_LIBS='$(BLAS_LIBS)' ONEDNN_CFLAGS='$(ONEDNN_CFLAGS)' ONEDNN_LIBS='$(ONEDNN_LIBS)' LIB_SOURCES='$(src_libmnistddp_a_SOURCES)'
.PHONY: fuzz fuzz-build clean-fuzz
fuzz-build: config.h
	@$(MAKE) -f $(srcdir)/tests/fuzz/fuzz.mk $(fuzz_vars)
fuzz: fuzz-build
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/fuzz/run.sh tests/fuzz/build $(FUZZ_SECONDS) $(FUZZ_HARNESSES)
clean-local: clean-fuzz
clean-fuzz:
	rm -rf tests/fuzz/build tests/fuzz/work
EXTRA_DIST += tests/fuzz/fuzz.mk tests/fuzz/run.sh tests/fuzz/fuzz_common.c tests/fuzz/fuzz_common.h \
	tests/fuzz/fuzz_idx.c tests/fuzz/fuzz_shard.c tests/fuzz/fuzz_model.c tests/fuzz/fuzz_options.c \
	tests/fuzz/options.dict tests/fuzz/corpus tests/fuzz/CAMPAIGN.md
