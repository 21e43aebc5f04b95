# Unit suites (Check, one process each): GEMM mapping, layer and whole-model gradient checks, optimizers,
# the GPU kernels' index math (kernels.h) against the CPU layers, its fused bodies against the pairs they fuse; IDX parsing, HDF5 shards and their
# manifests, the sampler; the atomic output files and their seal (check_atomic_file); the pure decisions of
# the collectives (bucket rule, overlap figure) and of the GPU path; duration formatting (check_log); the OpenBLAS kernels asked for (check_blas_core);
# the data layer's scans and digest comparisons on full-size inputs damaged at their end (check_full_size); wino43's
# AVX2 kernels against its AVX-512 ones, bit for bit (check_wino43_isa), and its input gradient on every residue
# of its tiles (check_wino43_edges), where they are built; the run lock's holder line and release (check_run_lock);
# a stopped rank's watcher and the watchdog (check_exit_watch); the error line, aligned allocation and SHA-256
# (check_base); the IDX reader's whole messages one byte either side of each size it checks (check_idx_edges);
# --profile's phases, device clock, table and JSON (check_profile);
# the HDF5 helpers' attributes, type checks and shapes on a file in memory (check_h5util);
# --save-model's layout loaded back bit for bit, and each tensor mismatch told apart (check_model_file).
# Fixtures: data_testutil (IDX files and shard sets), shards_testutil (the shard suites' data sets and
# scratch directories), model_testutil.h (random batches, a backend trained against the CPU), layer_testutil.h (finite differences),
# kernel_testutil.h (the kernels' reference loops).
unit_tests = tests/unit/check_gemm tests/unit/check_layers tests/unit/check_conv tests/unit/check_optim \
	tests/unit/check_model tests/unit/check_kernels tests/unit/check_fused tests/unit/check_conv_pool tests/unit/check_idx tests/unit/check_shards \
	tests/unit/check_shards_bad tests/unit/check_shards_writer tests/unit/check_sampler \
	tests/unit/check_comm_plan tests/unit/check_gpu_plan tests/unit/check_manifest tests/unit/check_log \
	tests/unit/check_atomic_file tests/unit/check_blas_core tests/unit/check_full_size \
	tests/unit/check_run_lock tests/unit/check_exit_watch tests/unit/check_base \
	tests/unit/check_idx_edges tests/unit/check_profile tests/unit/check_h5util \
	tests/unit/check_model_file
if HAVE_AVX512_KERNELS
unit_tests += tests/unit/check_wino43_isa tests/unit/check_wino43_edges
endif
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)
EXTRA_DIST += tests/unit/model_testutil.h tests/unit/kernel_testutil.h tests/unit/layer_testutil.h

data_test_util = tests/unit/data_testutil.c tests/unit/data_testutil.h
tests_unit_check_idx_SOURCES = tests/unit/check_idx.c $(data_test_util)
tests_unit_check_idx_edges_SOURCES = tests/unit/check_idx_edges.c $(data_test_util)
tests_unit_check_h5util_SOURCES = tests/unit/check_h5util.c $(data_test_util)
tests_unit_check_model_file_SOURCES = tests/unit/check_model_file.c $(data_test_util)
shards_test_util = tests/unit/shards_testutil.c tests/unit/shards_testutil.h $(data_test_util)
tests_unit_check_shards_SOURCES = tests/unit/check_shards.c $(shards_test_util)
tests_unit_check_shards_bad_SOURCES = tests/unit/check_shards_bad.c $(shards_test_util)
tests_unit_check_shards_writer_SOURCES = tests/unit/check_shards_writer.c $(shards_test_util)
tests_unit_check_manifest_SOURCES = tests/unit/check_manifest.c $(data_test_util)
tests_unit_check_atomic_file_SOURCES = tests/unit/check_atomic_file.c $(data_test_util)
tests_unit_check_full_size_SOURCES = tests/unit/check_full_size.c $(data_test_util)
tests_unit_check_run_lock_SOURCES = tests/unit/check_run_lock.c $(data_test_util)

# Check's flags, per program (automake has no per-directory flags).
tests_unit_check_gemm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_gemm_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_layers_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_layers_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_wino43_edges_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_wino43_edges_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_wino43_isa_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_wino43_isa_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_conv_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_conv_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_optim_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_optim_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_model_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_model_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_kernels_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_kernels_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_fused_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_fused_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_conv_pool_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_conv_pool_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_idx_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_idx_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_shards_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_shards_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_shards_bad_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_shards_bad_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_shards_writer_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_shards_writer_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_manifest_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_manifest_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_sampler_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_sampler_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_comm_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_comm_plan_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_gpu_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_gpu_plan_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_log_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_log_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_idx_edges_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_idx_edges_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_profile_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_profile_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_h5util_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_h5util_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_model_file_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_model_file_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_base_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_base_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_atomic_file_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_atomic_file_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_full_size_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_full_size_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_blas_core_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_blas_core_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_run_lock_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_run_lock_LDADD = $(LDADD) $(CHECK_LIBS)
tests_unit_check_exit_watch_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_unit_check_exit_watch_LDADD = $(LDADD) $(CHECK_LIBS)
