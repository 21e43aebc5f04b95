# An Lmod module file for the prefix: $(modulefiledir)/$(VERSION).lua, so that
#   module use $(datadir)/modulefiles; module load mnist_ddp
# puts the programs on PATH and the man pages on MANPATH and sets MNIST_DDP_SLURM to the templates.
# Written at install time (not build time), so it names the prefix the files really went to. A centre
# names the modules this build was made with: make install MODULE_DEPENDS="openmpi/4.1 hdf5 cuda/12 nccl"
# (one depends_on() each).
modulefiledir = $(datadir)/modulefiles/mnist_ddp
MODULE_DEPENDS =
EXTRA_DIST += modulefiles/mnist_ddp.lua.in

install-data-local: install-modulefile
install-modulefile:
	$(MKDIR_P) '$(DESTDIR)$(modulefiledir)'
	$(AM_V_GEN)sed -e 's|%VERSION%|$(VERSION)|g' -e 's|%prefix%|$(prefix)|g' -e 's|%bindir%|$(bindir)|g' \
	  -e 's|%mandir%|$(mandir)|g' -e 's|%pkgdatadir%|$(pkgdatadir)|g' $(srcdir)/modulefiles/mnist_ddp.lua.in | \
	awk -v deps='$(MODULE_DEPENDS)' '$$0 == "%DEPENDS%" { n = split(deps, d, " "); \
	  for (i = 1; i <= n; i++) printf "depends_on(\"%s\")\n", d[i]; next } { print }' \
	  >'$(DESTDIR)$(modulefiledir)/$(VERSION).lua'
uninstall-local: uninstall-modulefile
uninstall-modulefile:
	rm -f '$(DESTDIR)$(modulefiledir)/$(VERSION).lua'
.PHONY: install-modulefile uninstall-modulefile
