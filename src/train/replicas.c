#include "train/replicas.h"

#include "base/clock.h"
#include "comm/comm.h"
#include "comm/stall.h"
#include "comm/world.h"
#include "nn/model.h"

double wait_deadline(const run *r, const char **option)
{
    return comm_wait_deadline(r->o->comm_timeout, r->o->step_timeout, r->step - r->start.step, option);
}

void narrow_deadline(const run *r, int narrow)
{
    const char *option = "--comm-timeout";
    double s = narrow ? wait_deadline(r, &option) : r->o->comm_timeout;
    world_set_deadline(s, option);
}

void sync_and_check(run *r, const char *when)
{
    double t0 = clock_now();
    stall_phase("replica check", r->step);
    narrow_deadline(r, 1);
    if (model_buffer_size(r->m))
        r->cb->average(r->comm, model_buffers(r->m), model_buffer_size(r->m), "BatchNorm statistics");
    model_download(r->m, r->host_params, NULL);
    comm_check_replicas(r->host_params, model_num_params(r->m), when);
    narrow_deadline(r, 0);
    r->times.eval_s += clock_now() - t0;
}
