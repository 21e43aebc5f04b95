/* A rank whose launcher is gone (mpirun killed by the OOM killer, a dropped login session, a lost srun step)
 * must not train on unseen, holding its checkpoint directory. The launcher is the rank's parent, and a
 * parent's death re-parents the rank: a thread notices within LIFELINE_POLL_S. With checkpoints it raises
 * preemption's stop (the ranks agree, write a checkpoint and exit 75); without, or if the rank still runs
 * LIFELINE_GRACE_S later, the rank ends at once (69). */
#ifndef MNIST_LIFELINE_H
#define MNIST_LIFELINE_H

#define LIFELINE_POLL_S  0.25
#define LIFELINE_GRACE_S 10.0

/* From main's start, before MPI: only where a launcher started this process (a rank in the environment: a
 * process started from a shell may outlive its shell, nohup). checkpoints: --checkpoint-dir is given. */
void lifeline_start(int checkpoints);
#endif
