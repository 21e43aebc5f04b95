# Trainer integration tests: options and bad input, world-size invariance, identical replicas,
# accuracy (1 and 14 epochs) cross-checked by PyTorch; the collectives and their failures.
TESTS += tests/train-options.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh
EXTRA_DIST += tests/train-options.sh tests/train-invariance.sh tests/train-replicas.sh \
	tests/train-accuracy.sh tests/train-14epochs.sh tests/reference/eval_saved_model.py
EXTRA_DIST += tests/bench.sh tests/reference/pytorch_ddp_mnist.py

# The CPU collectives (src/comm_mpi.c): the Check suite runs on 2 ranks (tests/run-test), and also passes
# on 3 (MPI_NP=3); tests/comm_fail holds the scenarios that end the job, driven by comm-failures.sh with
# the trainer's own --comm-timeout stop.
check_PROGRAMS += tests/mpi_comm tests/comm_fail
tests_mpi_comm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_mpi_comm_LDADD = $(LDADD) $(CHECK_LIBS)
TESTS += tests/mpi_comm tests/comm-failures.sh
EXTRA_DIST += tests/comm-failures.sh

# Figures against the PyTorch peer in the same run; not part of make check.
.PHONY: bench
bench: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench.sh
