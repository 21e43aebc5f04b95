# The trainer: bootstrap, collectives, training loop, evaluation, model files, logging.
src_libmnistddp_a_SOURCES += \
	src/options.c src/options.h \
	src/bootstrap.c src/bootstrap.h src/threads.h src/blas_core.c src/blas_core.h \
	src/comm.h src/comm_mpi.c src/comm_plan.h src/comm_plan.c \
	src/train.c src/train.h src/train_run.h src/train_report.c src/step_graph.c src/step_graph.h \
	src/evaluate.c src/evaluate.h \
	src/atomic_file.c src/atomic_file.h src/checkpoint.c src/checkpoint.h src/train_state.c src/train_state.h src/preempt.c src/preempt.h \
	src/log.c src/log.h src/clock.h src/profile.c src/profile.h src/profile_clock.h
bin_PROGRAMS += src/mnist_ddp
src_mnist_ddp_SOURCES = src/main.c
