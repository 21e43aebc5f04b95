# Trainer integration tests: options and bad input, launcher environments, options reaching the run,
# world-size invariance, identical replicas, accuracy (1 and 14 epochs) cross-checked by PyTorch.
TESTS += tests/train-options.sh tests/train-launch.sh tests/train-cli.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh
EXTRA_DIST += tests/train-options.sh tests/train-launch.sh tests/train-cli.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh tests/reference/eval_saved_model.py
EXTRA_DIST += tests/bench.sh tests/reference/pytorch_ddp_mnist.py

# Figures against the PyTorch peer in the same run; not part of make check.
.PHONY: bench
bench: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench.sh
