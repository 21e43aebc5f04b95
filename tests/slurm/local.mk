# The Slurm templates' tests: select-port's formula, run-array.sbatch's sweep table written once (no Slurm
# needed), and slurm-ddp.sh, which starts a private single-node Slurm cluster (slurmctld, slurmd, munged)
# and runs the templates on it.
TESTS += tests/slurm/select-port.sh tests/slurm/sweep-once.sh tests/slurm/slurm-ddp.sh
EXTRA_DIST += tests/slurm/select-port.sh tests/slurm/sweep-once.sh tests/slurm/slurm-ddp.sh tests/slurm/cluster.sh
