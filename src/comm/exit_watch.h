/* A rank's last moments watched from outside it. Once every rank has passed the shutdown barrier, a rank
 * stopped inside MPI_Finalize's teardown or on its way out has no peer left to notice: the others exit and the
 * launcher waits for it forever. A child forked at that point outlives such a freeze. */
#ifndef MNIST_EXIT_WATCH_H
#define MNIST_EXIT_WATCH_H

/* Forks the watcher: it exits with this process, or, if this process stays stopped (SIGSTOP) for
 * seconds, prints `line` and kills it so that the launcher ends the job. Nothing is watched where fork fails
 * or /proc cannot tell a stopped process. */
void exit_watch_start(double seconds, const char *line);
#endif
