# The Slurm templates' tests: select-port's formula, and slurm-ddp.sh, which starts a private single-node
# Slurm cluster (slurmctld, slurmd, munged) and runs the templates on it.
TESTS += tests/slurm/select-port.sh tests/slurm/slurm-ddp.sh
EXTRA_DIST += tests/slurm/cluster.sh
EXTRA_DIST += tests/slurm/select-port.sh tests/slurm/slurm-ddp.sh
