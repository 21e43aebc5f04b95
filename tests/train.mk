# Trainer integration tests: options and bad input, launcher environments, options reaching the run,
# world-size invariance, identical replicas, accuracy after one epoch cross-checked by PyTorch, whole
# short runs replayed by a PyTorch DDP reference.
trainer_tests = tests/train-options.sh tests/train-launch.sh tests/train-cli.sh tests/train-invariance.sh \
	tests/train-replicas.sh tests/train-accuracy.sh tests/train-replay.sh tests/train-resume.sh \
	tests/train-preempt.sh
TESTS += $(trainer_tests)
EXTRA_DIST += $(trainer_tests) tests/train-14epochs.sh tests/reference/eval_saved_model.py \
	tests/reference/replay_ddp.py
EXTRA_DIST += tests/bench.sh tests/reference/pytorch_ddp_mnist.py

# The full recipe (14 epochs, ~7 minutes on 2 cores): not in make check, whose short runs check what it
# stands for (the StepLR schedule and the per-epoch reshuffle in train-replay.sh, one epoch's accuracy in
# train-accuracy.sh).
.PHONY: check-long
check-long:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='tests/train-14epochs.sh'

# The CPU collectives (src/comm_mpi.c): the Check suite runs on 2 ranks (tests/run-test), and also passes
# on 3 (MPI_NP=3); tests/comm_fail holds the scenarios that end the job, driven by comm-failures.sh with
# the trainer's own --comm-timeout stop.
check_PROGRAMS += tests/mpi_comm tests/comm_fail
tests_mpi_comm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_mpi_comm_LDADD = $(LDADD) $(CHECK_LIBS)
TESTS += tests/mpi_comm tests/comm-failures.sh
EXTRA_DIST += tests/comm-failures.sh

# The collectives' pure decisions (bucket rule, overlap figure), shared by the MPI and NCCL paths.
check_PROGRAMS += tests/check_comm_plan
TESTS += tests/check_comm_plan
tests_check_comm_plan_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_comm_plan_LDADD = $(LDADD) $(CHECK_LIBS)

# Figures against the PyTorch peer in the same run; not part of make check.
.PHONY: bench
bench: all $(check_DATA)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/bench.sh
