# mnist_ddp-plot: --metrics files into a PNG with gnuplot (sh + awk; installed beside the programs). Made
# from tools/mnist_ddp-plot.in with the package's version; its man page is help2man's (man/local.mk).
bin_SCRIPTS = tools/mnist_ddp-plot
CLEANFILES += tools/mnist_ddp-plot
EXTRA_DIST += tools/mnist_ddp-plot.in
tools/mnist_ddp-plot: $(srcdir)/tools/mnist_ddp-plot.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools && sed -e 's|%VERSION%|$(VERSION)|g' $(srcdir)/tools/mnist_ddp-plot.in >$@.tmp && \
	  chmod +x $@.tmp && mv $@.tmp $@
