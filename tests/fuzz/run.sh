#!/bin/sh
# Runs each libFuzzer harness for SECONDS: usage run.sh BUILD_DIR SECONDS HARNESS...
# Each starts from its committed seeds (tests/fuzz/corpus/<harness>, read only) and adds what it finds to
# tests/fuzz/work/<harness>/corpus; a crash, sanitizer report, hang (-timeout) or oversized allocation
# (-malloc_limit_mb) is written there as crash-*/timeout-*/oom-* and fails the run. The inputs of
# tests/fuzz/regressions/<harness> (crashes found before, now fixed) are replayed first.
# detect_leaks=0: a rejected input ends in die(), which the harness turns into a return; what that path
# leaves allocated is freed by exit() in the program, so it is not a leak (see fuzz_common.h).
set -u
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
status=0
# allocator_may_return_null: a size read from a damaged file (HDF5 asks malloc for 2^64 bytes) gets NULL, as
# from glibc, instead of an ASan report; the size check of the caller is what is under test.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
export ASAN_OPTIONS
for h in "$@"; do
  bin=$build/fuzz_$h work=tests/fuzz/work/$h
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (make fuzz-build)" >&2; exit 1; }
  mkdir -p "$work/corpus"
  set -- -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -artifact_prefix="$work/"
  [ -f "$here/$h.dict" ] && set -- "$@" -dict="$here/$h.dict"
  if [ -d "$here/regressions/$h" ]; then
    "$bin" "$@" "$here/regressions/$h"/* >"$work/regressions.log" 2>&1 \
      || { tail -n 40 "$work/regressions.log"; echo "fuzz: $h: a regression input fails again" >&2; status=1; }
  fi
  echo "fuzz: $h for ${seconds}s (log: $work/fuzz.log)"
  "$bin" "$@" -max_total_time="$seconds" -print_final_stats=1 "$work/corpus" "$here/corpus/$h" >"$work/fuzz.log" 2>&1
  rc=$?
  grep -E '^#[0-9]+.*(DONE|INITED)' "$work/fuzz.log" | tail -n 1
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$work/fuzz.log" | tr '\n' ' '
  echo
  if [ "$rc" -ne 0 ]; then
    grep -E -A 30 '^==[0-9]+==ERROR|runtime error|^==[0-9]+== ERROR|deadly signal|Test unit written' "$work/fuzz.log" | head -n 60
    echo "fuzz: $h failed ($rc): the input is in $work/" >&2
    status=1
  fi
done
exit $status
