#include "comm/world.h"

#include "base/errors.h"
#include "comm/stall.h"

/* Until main knows the options: --comm-timeout's default. */
static double deadline_s = 300;
static const char *deadline_option = "--comm-timeout";

void world_set_deadline(double seconds, const char *option)
{
    deadline_s = seconds;
    deadline_option = option;
}

double world_deadline(const char **option)
{
    *option = deadline_option;
    return deadline_s;
}

void world_wait(MPI_Request *req, int n, const char *what)
{
    long step;
    const char *phase = stall_phase_now(&step);
    stall_wait_all(req, n, 0, deadline_s, deadline_option, what ? what : phase, step);
}

void world_allreduce_on(MPI_Comm comm, const void *in, void *out, int n, MPI_Datatype type, MPI_Op op)
{
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(in, out, n, type, op, comm, &req));
    world_wait(&req, 1, NULL);
}

void world_bcast_on(MPI_Comm comm, void *buf, int n, MPI_Datatype type, int root)
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(buf, n, type, root, comm, &req));
    world_wait(&req, 1, NULL);
}

void world_barrier_on(MPI_Comm comm)
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(comm, &req));
    world_wait(&req, 1, NULL);
}

void world_dup_on(MPI_Comm comm, MPI_Comm *dup)
{
    MPI_Request req;
    MPI_Comm d; /* *dup only once complete */
    MPI_CHECK(MPI_Comm_idup(comm, &d, &req));
    world_wait(&req, 1, NULL);
    MPI_CHECK(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
    *dup = d;
}

void world_verdict(void *verdict, size_t bytes) { world_bcast(verdict, bytes, 0); }

void world_bcast(void *buf, size_t bytes, int root) { world_bcast_on(MPI_COMM_WORLD, buf, (int)bytes, MPI_BYTE, root); }

void world_sum_doubles(double *v, int n)
{
    world_allreduce_on(MPI_COMM_WORLD, MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM);
}
void world_max_doubles(double *v, int n)
{
    world_allreduce_on(MPI_COMM_WORLD, MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX);
}
void world_sum_longs(long *v, int n) { world_allreduce_on(MPI_COMM_WORLD, MPI_IN_PLACE, v, n, MPI_LONG, MPI_SUM); }
void world_sum_ints(int *v, int n) { world_allreduce_on(MPI_COMM_WORLD, MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM); }
void world_min_ints(int *v, int n) { world_allreduce_on(MPI_COMM_WORLD, MPI_IN_PLACE, v, n, MPI_INT, MPI_MIN); }

void world_gather(const void *mine, void *all, size_t bytes)
{
    MPI_Request req;
    MPI_CHECK(MPI_Igather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req));
    world_wait(&req, 1, NULL);
}

void world_allgather_on(MPI_Comm comm, const void *mine, void *all, size_t bytes)
{
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm, &req));
    world_wait(&req, 1, NULL);
}

int world_size(void)
{
    int n;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    return n;
}

double world_time(void) { return MPI_Wtime(); }
