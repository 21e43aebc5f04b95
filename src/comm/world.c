#include "comm/world.h"

#include "base/errors.h"

void world_verdict(void *verdict, size_t bytes) { world_bcast(verdict, bytes, 0); }

void world_bcast(void *buf, size_t bytes, int root)
{
    MPI_CHECK(MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD));
}

void world_sum_doubles(double *v, int n)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}
void world_max_doubles(double *v, int n)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
}
void world_sum_longs(long *v, int n)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
}
void world_sum_ints(int *v, int n) { MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD)); }
void world_min_ints(int *v, int n) { MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MIN, MPI_COMM_WORLD)); }

void world_gather(const void *mine, void *all, size_t bytes)
{
    MPI_CHECK(MPI_Gather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
}

void world_allgather_on(MPI_Comm comm, const void *mine, void *all, size_t bytes)
{
    MPI_CHECK(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, comm));
}

int world_size(void)
{
    int n;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    return n;
}

double world_time(void) { return MPI_Wtime(); }
