/* Preemption: SIGUSR1, SIGTERM and SIGINT only set a flag (no I/O in a handler, so a checkpoint is never
 * written from one, and a second signal cannot interrupt a write half-way). The trainer asks at each step
 * boundary whether any rank caught one: a signal that reaches one rank is enough. */
#ifndef MNIST_PREEMPT_H
#define MNIST_PREEMPT_H

/* Installs the handlers (only with checkpoints: without them the default, ending at once, is better). */
void preempt_install(void);
/* Collective: the signal any rank caught (0: none); *age gets the seconds since the first one. */
int preempt_agree(double *age);
/* "SIGUSR1", ... */
const char *preempt_name(int sig);
#endif
