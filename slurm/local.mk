# Slurm templates, port selection and the scaling helper (installed under $(pkgdatadir)/slurm/, where
# run-*.sbatch find them with MNIST_DDP_ROOT=$(pkgdatadir)); their tests are in tests/slurm.
nobase_dist_pkgdata_SCRIPTS = slurm/run-ddp.sbatch slurm/run-array.sbatch slurm/select-port slurm/scaling
nobase_dist_pkgdata_DATA = slurm/sweep.tsv
