# Benchmarks, not tests: figures next to the PyTorch peer's in the same run (bench), and on a GPU node
# (bench-gpu: 1 GPU, all GPUs of the node, each --precision; without a GPU it says so and succeeds), and the
# scaling model against emulated nodes (bench-nodes, root).
check_PROGRAMS += tests/bench/bench_model
EXTRA_DIST += tests/bench/bench.sh tests/bench/bench-gpu.sh tests/bench/bench-nodes.sh

.PHONY: bench bench-gpu bench-nodes
bench: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench/bench.sh
bench-gpu: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench/bench-gpu.sh
bench-nodes: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench/bench-nodes.sh
