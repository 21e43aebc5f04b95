# A ./configure --enable-sanitizers build (AddressSanitizer + UndefinedBehaviorSanitizer): every test runs with
# these run-time options. Any report fails the test (halt_on_error; UBSan built -fno-sanitize-recover), the
# leak check runs at each process's exit, and only the libraries' own known reports are suppressed (each
# entry of lsan.supp says why). Check's per-test time limits are stretched: sanitized code runs 2-3x slower.
# use_tls=0: LSan's scan of thread-local storage crashes its tracer thread on Debian 12 (glibc 2.36, GCC 12)
# once Open MPI has loaded its components; fast_unwind_on_malloc=0 gives the full allocation stacks the
# suppressions match (Open MPI's libraries have no frame pointers).
if SANITIZERS
AM_TESTS_ENVIRONMENT += \
	ASAN_OPTIONS='halt_on_error=1:abort_on_error=1:disable_coredump=1:detect_leaks=1:fast_unwind_on_malloc=0'; \
	LSAN_OPTIONS='suppressions=$(abs_top_srcdir)/tests/sanitizers/lsan.supp:print_suppressions=0:use_tls=0'; \
	UBSAN_OPTIONS='halt_on_error=1:print_stacktrace=1'; \
	CK_TIMEOUT_MULTIPLIER=4; \
	export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS CK_TIMEOUT_MULTIPLIER;
endif
EXTRA_DIST += tests/sanitizers/lsan.supp
