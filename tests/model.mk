# Model tests: GEMM mapping, layer and whole-model gradient checks, optimizers, model API, the GPU
# kernels' index math (kernels.h) against the CPU layers, and the PyTorch cross-check
# (tests/ref_model writes HDF5, compare_model.py replays it in torch).
model_check_tests = tests/check_gemm tests/check_layers tests/check_optim tests/check_model tests/check_kernels
check_PROGRAMS += $(model_check_tests) tests/ref_model tests/bench_model
TESTS += $(model_check_tests) tests/reference/compare_model.py
EXTRA_DIST += tests/reference/compare_model.py tests/reference/rng.py

tests_check_gemm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_gemm_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_layers_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_layers_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_optim_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_optim_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_model_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_model_LDADD = $(LDADD) $(CHECK_LIBS)
tests_check_kernels_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_kernels_LDADD = $(LDADD) $(CHECK_LIBS)
