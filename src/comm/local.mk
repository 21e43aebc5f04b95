# comm: the MPI bootstrap (rank, world, node-local rank, launcher cross-checks), whether each rank's threads
# fit its CPUs (cpu_fit), the collectives' table and its MPI implementation, the gradient bucket plan, the
# ranks' agreement on a preemption signal or the job's time limit, the launcher's death noticed (lifeline),
# and who is where (stall: a missed deadline's culprits, the SIGUSR2 status line); world.h: the plain
# collectives of the layers above, each within a deadline (MPI is called in comm/ alone).
src_libmnistddp_a_SOURCES += src/comm/bootstrap.c src/comm/bootstrap.h src/comm/comm.h src/comm/comm_mpi.c \
	src/comm/comm_plan.c src/comm/comm_plan.h src/comm/cpu_fit.c src/comm/cpu_fit.h src/comm/exit_watch.c src/comm/exit_watch.h \
	src/comm/grad_shm.c src/comm/grad_shm.h src/comm/lifeline.c src/comm/lifeline.h \
	src/comm/preempt.c src/comm/preempt.h \
	src/comm/progress.c src/comm/progress.h src/comm/stall.c src/comm/stall.h src/comm/world.c src/comm/world.h
