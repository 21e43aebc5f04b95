# Integration tests: the programs as users run them, under mpirun.
# - the trainer: options and bad input, launcher environments, options reaching the run, world-size
#   invariance, identical replicas, accuracy after one epoch cross-checked by PyTorch, whole short runs
#   replayed by a PyTorch DDP reference, checkpoints and resume (exact, elastic, refusals), preemption by
#   a signal or a killed rank; checkpoints and model files of earlier versions (tests/fixtures) resumed or
#   refused by format (checkpoint-versions);
# - the output files: damaged model files and checkpoints refused before HDF5 parses them (files-corrupt);
#   their modes and failure paths: full disk, read-only directory, a killed writer's temporaries
#   (files-failures); no listening socket of the trainer's own (sockets);
# - the CPU collectives (src/comm/comm_mpi.c): a Check suite on 2 ranks (tests/run-test; also passes on 3 with
#   MPI_NP=3), and comm_fail's scenarios that end the job, driven by comm-failures.sh and, for a stalled
#   job's named culprits and the SIGUSR2 status line, stall-names.sh; a rank frozen in each phase of a run
#   (stall-phases.sh) and a killed launcher (launcher-lost.sh) end the job in time; a seeded soak of faults
#   over restarts of one run ends bit for bit as an uninterrupted run (fault-soak.sh; 'make soak': longer);
# - the data tools: mnist2h5 and data/fetch-mnist;
# - damaged shard sets: a seeded corruption campaign on the reader (shard_load) and the trainer;
# - durability order (durability.sh): fsync before rename, the directory after, read from the system calls
#   by an LD_PRELOAD shim (syscall_log.c).
# - a CPU without AVX-512 (cpu-avx2.sh): the layers, the PyTorch cross-check and a training with the ISA capped.
integration_scripts = tests/integration/train-options.sh tests/integration/train-launch.sh \
	tests/integration/train-cli.sh tests/integration/train-invariance.sh tests/integration/train-replicas.sh \
	tests/integration/train-accuracy.sh tests/integration/train-replay.sh tests/integration/train-resume.sh \
	tests/integration/train-preempt.sh tests/integration/train-timelimit.sh tests/integration/comm-failures.sh \
	tests/integration/mnist2h5.sh tests/integration/fetch-mnist.sh tests/integration/shard-corruption.sh \
	tests/integration/train-progress.sh tests/integration/train-profile.sh tests/integration/plot.sh tests/integration/files-corrupt.sh \
	tests/integration/files-failures.sh tests/integration/sockets.sh tests/integration/checkpoint-lock.sh \
	tests/integration/durability.sh tests/integration/stall-names.sh tests/integration/stall-phases.sh \
	tests/integration/launcher-lost.sh tests/integration/fault-soak.sh tests/integration/train-gradcomm.sh \
	tests/integration/cpu-avx2.sh tests/integration/checkpoint-versions.sh tests/integration/edges.sh \
	tests/integration/resume-never.sh
TESTS += $(integration_scripts) tests/integration/mpi_comm
EXTRA_DIST += $(integration_scripts) tests/integration/train-14epochs.sh
# Files written by earlier versions, one per format (tests/fixtures/README.md says how each was made).
EXTRA_DIST += tests/fixtures/README.md tests/fixtures/ckpt-f80537a-unsealed.h5 \
	tests/fixtures/ckpt-249fecd-checkpoint_format.h5 tests/fixtures/ckpt-f745d2a-no-grad_comm.h5 \
	tests/fixtures/ckpt-5036e7d-grad_comm.h5 tests/fixtures/model-f80537a-unsealed.h5 \
	tests/fixtures/model-5036e7d-sealed.h5 tests/fixtures/ckpt-b649878-sgd-no-momentum.h5
check_PROGRAMS += tests/integration/mpi_comm tests/integration/comm_fail tests/integration/shard_load
tests_integration_mpi_comm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_integration_mpi_comm_LDADD = $(LDADD) $(CHECK_LIBS)

# durability.sh's shim: a plain shared object (the project does not use libtool), without the project's
# CFLAGS, so a sanitized build's flags do not reach a library preloaded into other programs.
tests/integration/syscall_log.so: $(srcdir)/tests/integration/syscall_log.c
	@$(MKDIR_P) tests/integration
	$(AM_V_CC)$(CC) -O2 -Wall -Wextra -shared -fPIC -o $@ $(srcdir)/tests/integration/syscall_log.c -ldl
check_DATA += tests/integration/syscall_log.so
CLEANFILES += tests/integration/syscall_log.so
EXTRA_DIST += tests/integration/syscall_log.c

# The full recipe (14 epochs, ~7 minutes on 2 cores): not in make check, whose short runs check what it
# stands for (the StepLR schedule and the per-epoch reshuffle in train-replay.sh, one epoch's accuracy in
# train-accuracy.sh).
# The fault soak at length, beside the fuzzers: 40 faulted starts on one node, then 20 on two emulated nodes
# (partitions among the faults; skipped with the reason where namespaces cannot be made), a fresh seed each
# time (printed, so that SOAK_SEED=N make soak replays a failure).
SOAK_ROUNDS = 40
.PHONY: soak
soak: all
	@seed=$${SOAK_SEED:-$$(date +%s)}; $(AM_TESTS_ENVIRONMENT) export SOAK_SEED=$$seed; \
	SOAK_ROUNDS=$(SOAK_ROUNDS) $(SHELL) $(srcdir)/tests/integration/fault-soak.sh || exit 1; \
	SOAK_ROUNDS=$$(($(SOAK_ROUNDS) / 2)) $(SHELL) $(srcdir)/tests/multinode/soak-nodes.sh; rc=$$?; \
	[ $$rc -eq 0 ] || [ $$rc -eq 77 ]

.PHONY: check-long
check-long:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS='tests/integration/train-14epochs.sh'
