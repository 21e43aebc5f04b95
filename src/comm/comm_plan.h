/* What the gradient all-reduce decides without a network, shared by the MPI path (comm_mpi.c) and the
 * NCCL path (src/gpu/cuda/nccl_comm.cu): the bucket rule, and the overlap figures both report. MPI- and
 * CUDA-free, so nvcc includes it and the CPU-only build tests it. */
#ifndef MNIST_COMM_PLAN_H
#define MNIST_COMM_PLAN_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The bucket rule: backward reports final gradient ranges back to front; adjacent ranges merge into a
 * pending range, which starts (all-reduce posted) once it holds bucket_floats, or when a non-adjacent
 * range arrives; bucket_flush() starts the remainder. */
typedef struct {
    size_t n, bucket_floats;
    size_t lo, hi; /* pending range [lo, hi), empty when lo == hi */
} bucket_plan;

void bucket_init(bucket_plan *b, size_t n, size_t bucket_floats);
/* Forgets the pending range (start of a pass). */
void bucket_reset(bucket_plan *b);
/* [offset, offset + count) is final. Returns how many ranges (0, 1 or 2) to start now, in order, as
 * start[i] (first element) and counts[i]. */
int bucket_ready(bucket_plan *b, size_t offset, size_t count, size_t start[2], size_t counts[2]);
/* The pending remainder: returns 1 and the range, or 0 when nothing is pending. Resets the plan. */
int bucket_flush(bucket_plan *b, size_t *start, size_t *count);

/* The gradient all-reduce's figures, on either device. */
typedef struct {
    long reductions;   /* armed passes reduced (optimizer steps) */
    double exposed_s;  /* summed over reductions: time from the end of backward to the completion of the
                          last bucket (communication not hidden behind backward) */
    double blocking_s; /* one isolated all-reduce of the whole gradient, measured at create: best of 3,
                          maximum over ranks (0 with one rank) */
    int buckets;       /* buckets in the last reduction */
    long launched;     /* all-reduce operations posted in total */
    int progress;      /* the MPI progress thread runs (comm.h's grad_comm_set_progress) */
    long early;        /* reductions complete before finish() began (seen by that thread) */
    int shm;           /* summed in shared memory by the ranks themselves (grad_shm.h), not by MPI */
    double skew_s;     /* of exposed_s, the time waiting for the last rank's backward to end (measured in shared
                          memory only, else 0): the ranks' unequal speed, not communication */
} comm_stats;

/* The deadline of a gradient all-reduce wait; *option gets the name of the option that set it, for the
 * message. Before this process's first reduction (ranks start at different times, the first step is slow)
 * a wait lasts up to startup_s (--comm-timeout). Later steps wait up to the shorter of startup_s and
 * steady_s (--step-timeout), so a frozen peer ends the job soon. */
double comm_wait_deadline(double startup_s, double steady_s, long reductions, const char **option);

/* Exposed seconds per reduction. */
double comm_exposed_per_step(const comm_stats *s);
/* Share of the isolated all-reduce time hidden behind backward: 1 - exposed / blocking, within [0, 1]; pass
 * the exposed time less the skew where that is known. */
double comm_hidden_fraction(double exposed_s, double blocking_s);

/* A stand-in for the other GPUs' traffic (MNIST_DDP_COMM_PROXY; one GPU armed alone). After each bucket the
 * communication stream also moves the bytes a ring all-reduce over 'ranks' GPUs moves through each of them,
 * 2 (ranks - 1) / ranks times the bucket, taking as long as those bytes take at bus_gbps. bus_gbps is NCCL's
 * bus bandwidth (GB/s, as nccl-tests reports it); 0: no proxy. */
typedef struct {
    double bus_gbps;
    int ranks;
} comm_proxy_spec;

/* Parses "GBPS" or "GBPS:RANKS" (0 < GBPS <= 100000, 2 <= RANKS <= 65536, default 8): 0, or -1 with why. */
int comm_proxy_parse(const char *s, comm_proxy_spec *p, char *why, size_t len);
/* Bytes the ring moves through one GPU for a bucket of 'bytes'; the seconds that takes at bus_gbps. */
double comm_proxy_bytes(const comm_proxy_spec *p, double bytes);
double comm_proxy_seconds(const comm_proxy_spec *p, double bytes);

#ifdef __cplusplus
}
#endif
#endif
