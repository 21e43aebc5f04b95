# Man pages. mnist_ddp.1 and mnist2h5.1 are generated from --help by help2man (with the extra sections in
# man/*.h2m) and committed, so a cluster builds and installs them without help2man; `make man` regenerates
# them (maintainers, after changing --help), and CI (.ci/install-check) fails when they no longer match
# --help.
dist_man_MANS = man/mnist_ddp.1 man/mnist2h5.1 man/mnist_ddp-plot.1
EXTRA_DIST += man/mnist_ddp.h2m man/mnist2h5.h2m man/mnist_ddp-plot.h2m

HELP2MAN = help2man
help2man_run = $(HELP2MAN) --no-info --no-discard-stderr
man: src/mnist_ddp$(EXEEXT) src/mnist2h5$(EXEEXT) tools/mnist_ddp-plot
	$(help2man_run) --include=$(srcdir)/man/mnist_ddp.h2m -o $(srcdir)/man/mnist_ddp.1 src/mnist_ddp$(EXEEXT)
	$(help2man_run) --include=$(srcdir)/man/mnist2h5.h2m -o $(srcdir)/man/mnist2h5.1 src/mnist2h5$(EXEEXT)
	$(help2man_run) --include=$(srcdir)/man/mnist_ddp-plot.h2m -o $(srcdir)/man/mnist_ddp-plot.1 tools/mnist_ddp-plot
.PHONY: man
