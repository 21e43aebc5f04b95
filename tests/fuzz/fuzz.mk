# GNU make rules for the libFuzzer harnesses, run by 'make fuzz' (tests/fuzz/local.mk passes srcdir, the
# library's C sources and the HDF5/libcrypto/BLAS/oneDNN flags). A separate build with clang: every object, the library's
# included, needs -fsanitize=fuzzer-no-link for coverage feedback. OpenMP is left out (clang's runtime is
# another package, and no harness reaches the parallel loops).
FUZZ_CLANG ?= clang
# The MPI wrapper around clang (Open MPI reads OMPI_CC, MPICH reads MPICH_CC).
FUZZ_CC = OMPI_CC=$(FUZZ_CLANG) MPICH_CC=$(FUZZ_CLANG) $(MPICC)
SAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=gnu11 -g -O1 $(SAN) -fsanitize=fuzzer-no-link -Wall -Wno-unknown-pragmas \
	-I. -I$(srcdir)/src -I$(srcdir)/tests/fuzz $(HDF5_CFLAGS) $(CRYPTO_CFLAGS) $(BLAS_CFLAGS) $(ONEDNN_CFLAGS)
HARNESSES = idx shard model options
B = tests/fuzz/build

lib_objs = $(patsubst %.c,$(B)/%.o,$(filter %.c,$(LIB_SOURCES)))
all: $(HARNESSES:%=$(B)/fuzz_%)

$(B)/%.o: $(srcdir)/%.c config.h
	@mkdir -p $(dir $@)
	@echo "  FUZZCC   $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libfuzzlib.a: $(lib_objs)
	@rm -f $@ && ar cr $@ $^

$(B)/fuzz_%: $(B)/tests/fuzz/fuzz_%.o $(B)/tests/fuzz/fuzz_common.o $(B)/libfuzzlib.a
	@echo "  FUZZLD   $@"
	@$(FUZZ_CC) $(SAN) -fsanitize=fuzzer -o $@ $^ $(HDF5_LIBS) $(CRYPTO_LIBS) $(ONEDNN_LIBS) $(BLAS_LIBS) -lm

-include $(lib_objs:.o=.d) $(HARNESSES:%=$(B)/tests/fuzz/fuzz_%.d)
.SECONDARY:
