# A ./configure --enable-sanitizers build (AddressSanitizer + UndefinedBehaviorSanitizer): every test runs with
# these run-time options. Any report fails the test (halt_on_error; UBSan built -fno-sanitize-recover), the
# leak check runs at each process's exit, and only the libraries' own known reports are suppressed (each
# entry of the .supp files says why).
if SANITIZERS
AM_TESTS_ENVIRONMENT += \
	ASAN_OPTIONS='halt_on_error=1:abort_on_error=1:disable_coredump=1:detect_leaks=1:fast_unwind_on_malloc=0'; \
	LSAN_OPTIONS='suppressions=$(abs_top_srcdir)/tests/sanitizers/lsan.supp:print_suppressions=0:use_tls=0'; \
	UBSAN_OPTIONS='halt_on_error=1:print_stacktrace=1:suppressions=$(abs_top_srcdir)/tests/sanitizers/ubsan.supp'; \
	export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS;
endif
EXTRA_DIST += tests/sanitizers/lsan.supp tests/sanitizers/ubsan.supp
