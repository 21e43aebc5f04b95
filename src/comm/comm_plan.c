#include "comm/comm_plan.h"

void bucket_init(bucket_plan *b, size_t n, size_t bucket_floats)
{
    b->n = n;
    b->bucket_floats = bucket_floats;
    bucket_reset(b);
}

void bucket_reset(bucket_plan *b) { b->lo = b->hi = b->n; }

static int take_pending(bucket_plan *b, size_t *start, size_t *count)
{
    if (b->hi == b->lo)
        return 0;
    *start = b->lo;
    *count = b->hi - b->lo;
    b->hi = b->lo;
    return 1;
}

int bucket_ready(bucket_plan *b, size_t offset, size_t count, size_t start[2], size_t counts[2])
{
    int k = 0;
    if (offset + count != b->lo) /* not adjacent to the pending range: start it, begin a new one */
        k += take_pending(b, &start[k], &counts[k]);
    if (b->hi == b->lo)
        b->hi = offset + count;
    b->lo = offset;
    if (b->hi - b->lo >= b->bucket_floats)
        k += take_pending(b, &start[k], &counts[k]);
    return k;
}

int bucket_flush(bucket_plan *b, size_t *start, size_t *count)
{
    int k = take_pending(b, start, count);
    bucket_reset(b);
    return k;
}

double comm_exposed_per_step(const comm_stats *s) { return s->reductions ? s->exposed_s / (double)s->reductions : 0; }

double comm_hidden_fraction(double exposed_s, double blocking_s)
{
    if (blocking_s <= 0)
        return 0;
    double h = 1 - exposed_s / blocking_s;
    return h < 0 ? 0 : h > 1 ? 1 : h;
}

double comm_wait_deadline(double startup_s, double steady_s, long reductions, const char **option)
{
    int steady = reductions > 0 && steady_s < startup_s;
    *option = steady ? "--step-timeout" : "--comm-timeout";
    return steady ? steady_s : startup_s;
}
