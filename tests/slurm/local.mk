# The Slurm templates' tests: select-port's formula, run-array.sbatch's sweep table written once (no Slurm
# needed), and slurm-ddp.sh and slurm-array.sh, which each start a private single-node Slurm cluster
# (slurmctld, slurmd, munged; job IDs of their own) and run the templates on it.
TESTS += tests/slurm/select-port.sh tests/slurm/sweep-once.sh tests/slurm/slurm-ddp.sh tests/slurm/slurm-array.sh
# slurm/scaling-model's arithmetic and --check (no Slurm needed).
TESTS += tests/slurm/scaling-model.sh
EXTRA_DIST += tests/slurm/scaling-model.sh tests/slurm/select-port.sh tests/slurm/sweep-once.sh tests/slurm/slurm-ddp.sh tests/slurm/slurm-array.sh \
	tests/slurm/cluster.sh
