# base: what every layer uses: fatal errors and warnings, logging and the metrics file, clocks and the
# per-phase profile, files written whole (temporary name, then rename), SHA-256 (OpenSSL's libcrypto),
# one run per directory (a lock), the watchdog of waits nothing else bounds, the counter-based RNG, the host/device macros, thread counts, bfloat16.
src_libmnistddp_a_SOURCES += src/base/errors.c src/base/errors.h src/base/log.c src/base/log.h src/base/clock.h \
	src/base/profile.c src/base/profile.h src/base/profile_clock.h src/base/atomic_file.c src/base/atomic_file.h \
	src/base/run_lock.c src/base/run_lock.h src/base/watchdog.c src/base/watchdog.h \
	src/base/sha256.c src/base/sha256.h src/base/rng.h src/base/host_device.h src/base/threads.h \
	src/base/bf16.h
