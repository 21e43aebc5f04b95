# Slurm templates, port selection and the scaling helper (installed under $(pkgdatadir)/slurm/, where
# run-*.sbatch find them with MNIST_DDP_ROOT=$(pkgdatadir)), and their tests: select-port's formula,
# and tests/slurm-ddp.sh, which starts a private single-node Slurm cluster (slurmctld, slurmd, munged).
nobase_dist_pkgdata_SCRIPTS = slurm/run-ddp.sbatch slurm/run-array.sbatch slurm/select-port slurm/scaling
nobase_dist_pkgdata_DATA = slurm/sweep.tsv
TESTS += tests/select-port.sh tests/slurm-ddp.sh
EXTRA_DIST += tests/select-port.sh tests/slurm-ddp.sh
