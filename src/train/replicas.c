#include "train/replicas.h"

#include <mpi.h>

#include "base/clock.h"
#include "comm/comm.h"
#include "nn/model.h"

double wait_deadline(const run *r, const char **option)
{
    return comm_wait_deadline(r->o->comm_timeout, r->o->step_timeout, r->step - r->start.step, option);
}

void sync_and_check(run *r, const char *when)
{
    double t0 = clock_now();
    if (model_buffer_size(r->m))
        r->cb->average(r->comm, model_buffers(r->m), model_buffer_size(r->m), "BatchNorm statistics");
    model_download(r->m, r->host_params, NULL);
    comm_check_replicas(MPI_COMM_WORLD, r->host_params, model_num_params(r->m), when);
    r->times.eval_s += clock_now() - t0;
}
