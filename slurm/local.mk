# Slurm templates, port selection and the scaling helper, installed under $(pkgdatadir)/slurm/; their tests
# are in tests/slurm. In a checkout they find the binary through the submit directory (or MNIST_DDP_ROOT and
# MNIST_DDP); the installed copies are rewritten to default to this prefix's $(bindir)/mnist_ddp and
# $(pkgdatadir), so they work with no checkout present (MNIST_DDP_ROOT / MNIST_DDP still override).
nobase_dist_pkgdata_SCRIPTS = slurm/run-ddp.sbatch slurm/run-array.sbatch slurm/select-port slurm/scaling \
	slurm/scaling-model slurm/sweep-summary
nobase_dist_pkgdata_DATA = slurm/sweep.tsv

# The lines rewritten (each must match exactly once per script that has it; the hook checks the result).
slurm_installed_sed = \
	-e 's|^root=$${MNIST_DDP_ROOT:-$$SLURM_SUBMIT_DIR}$$|root=$${MNIST_DDP_ROOT:-$(pkgdatadir)}|' \
	-e 's|^root=$$(cd "$$(dirname "$$0")/.." \&\& pwd)$$|root=$(pkgdatadir)|' \
	-e 's|^bin=$${MNIST_DDP:-$$root/src/mnist_ddp}$$|bin=$${MNIST_DDP:-$(bindir)/mnist_ddp}|' \
	-e 's|^data=$${MNIST_DATA:-$$root/data/mnist}$$|data=$${MNIST_DATA:-$$SLURM_SUBMIT_DIR/data/mnist}|'
install-data-hook: install-data-hook-slurm
install-data-hook-slurm:
	@for f in run-ddp.sbatch run-array.sbatch scaling; do \
	  dst='$(DESTDIR)$(pkgdatadir)/slurm/'$$f; \
	  sed $(slurm_installed_sed) "$$dst" >"$$dst.tmp" && cat "$$dst.tmp" >"$$dst" && rm -f "$$dst.tmp" || exit 1; \
	  grep -q '^root=.*$(pkgdatadir)' "$$dst" || { echo "$$dst: no installed root after the rewrite" >&2; exit 1; }; \
	done; \
	for f in run-ddp.sbatch scaling; do \
	  grep -q '^bin=.*$(bindir)/mnist_ddp' '$(DESTDIR)$(pkgdatadir)/slurm/'$$f || \
	    { echo "$$f: no installed binary after the rewrite" >&2; exit 1; }; \
	done
.PHONY: install-data-hook-slurm
