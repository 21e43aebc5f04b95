# Trainer integration tests: options and bad input, world-size invariance, identical replicas,
# accuracy (1 and 14 epochs) cross-checked by PyTorch, whole short runs replayed by a PyTorch DDP reference.
TESTS += tests/train-options.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh tests/train-replay.sh
EXTRA_DIST += tests/train-options.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh tests/reference/eval_saved_model.py \
	tests/train-replay.sh tests/reference/replay_ddp.py
EXTRA_DIST += tests/bench.sh tests/reference/pytorch_ddp_mnist.py

# Figures against the PyTorch peer in the same run; not part of make check.
.PHONY: bench
bench: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench.sh
