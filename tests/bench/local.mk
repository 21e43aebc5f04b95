# Benchmarks, not tests: figures next to the PyTorch peer's in the same run (bench), and on a GPU node
# (bench-gpu: 1 GPU, all GPUs of the node, each --precision; without a GPU it says so and succeeds; gpu-report:
# the same, strict, into gpu-report-HOST.txt), and the scaling model against emulated nodes (bench-nodes, root).
check_PROGRAMS += tests/bench/bench_model tests/bench/bench_gemm
EXTRA_DIST += tests/bench/bench.sh tests/bench/bench-gpu.sh tests/bench/bench_gpu_report.py tests/bench/bench-nodes.sh

.PHONY: bench bench-gpu gpu-report bench-nodes
bench: all $(check_DATA)
	@$(run_environment) $(SHELL) $(srcdir)/tests/bench/bench.sh
bench-gpu: all $(check_DATA)
	@$(run_environment) $(SHELL) $(srcdir)/tests/bench/bench-gpu.sh
# A GPU that cannot be used, or a missing library, fails it; the report is written as it runs.
gpu-report: all $(check_DATA)
	@report=gpu-report-`hostname`.txt; \
	{ BENCH_GPU_STRICT=1; export BENCH_GPU_STRICT; $(run_environment) $(SHELL) $(srcdir)/tests/bench/bench-gpu.sh 2>&1; \
	  echo $$? >$$report.rc; } | tee $$report; \
	rc=`cat $$report.rc`; rm -f $$report.rc; echo "report: $$report"; exit $$rc
bench-nodes: all $(check_DATA)
	@$(run_environment) $(SHELL) $(srcdir)/tests/bench/bench-nodes.sh
