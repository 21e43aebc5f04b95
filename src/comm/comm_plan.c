#include "comm/comm_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

int comm_proxy_parse(const char *s, comm_proxy_spec *p, char *why, size_t len)
{
    char *end;
    errno = 0;
    double gbps = strtod(s, &end);
    if (end == s || errno || !(gbps > 0 && gbps <= 100000)) {
        snprintf(why, len, "the bus bandwidth must be a number of GB/s in (0, 100000], as in 370 or 25:16");
        return -1;
    }
    long ranks = 8;
    if (*end == ':') {
        const char *r = end + 1;
        ranks = strtol(r, &end, 10);
        if (end == r || errno || ranks < 2 || ranks > 65536) {
            snprintf(why, len, "the rank count after ':' must be an integer from 2 to 65536");
            return -1;
        }
    }
    if (*end) {
        snprintf(why, len, "expected GBPS or GBPS:RANKS, as in 370 or 25:16");
        return -1;
    }
    p->bus_gbps = gbps;
    p->ranks = (int)ranks;
    return 0;
}

double comm_proxy_bytes(const comm_proxy_spec *p, double bytes) { return 2.0 * (p->ranks - 1) / p->ranks * bytes; }

double comm_proxy_seconds(const comm_proxy_spec *p, double bytes)
{
    return p->bus_gbps > 0 ? comm_proxy_bytes(p, bytes) / (p->bus_gbps * 1e9) : 0;
}
