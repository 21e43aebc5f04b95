/* Preemption: SIGUSR1, SIGTERM and SIGINT only set a flag (no I/O in a handler, so a checkpoint is never
 * written from one, and a second signal cannot interrupt a write half-way). The trainer asks at each step
 * boundary whether any rank caught one: a signal that reaches one rank is enough. */
#ifndef MNIST_PREEMPT_H
#define MNIST_PREEMPT_H

/* The "signal" of a run that stopped itself before the Slurm job's time limit (preempt_agree). */
enum { PREEMPT_TIME_LIMIT = 1000, PREEMPT_LAUNCHER_GONE = 1001 };

/* Collective: the job's end, in seconds since the epoch, or 0 when unknown; rank 0 finds it and broadcasts
 * it. From MNIST_DDP_JOB_END (epoch seconds; for tests only), else SLURM_JOB_END_TIME, else the EndTime of
 * this job's own line of 'scontrol show job' (Slurm 22.05 does not export the former; an array task asks for
 * ARRAY_TASK). An end already past is ignored with a warning. */
double preempt_job_end(void);
/* Installs the handlers (only with checkpoints: without them the default, ending at once, is better). */
void preempt_install(void);
/* Collective, waiting at most timeout_s (option names that bound in the message): the first signal any rank
 * caught (0: none), else PREEMPT_TIME_LIMIT when time_up on any rank; *age gets the seconds since it. */
int preempt_agree(double *age, int time_up, double timeout_s, const char *option, long step);
/* A stop as by a signal, from code (lifeline.h): sig is a PREEMPT_* value. */
void preempt_raise(int sig);
/* "SIGUSR1", ... */
const char *preempt_name(int sig);
#endif
