#!/bin/sh
# Runs each libFuzzer harness for SECONDS: usage run.sh BUILD_DIR SECONDS HARNESS...
# Each starts from its committed seeds (tests/fuzz/corpus/<harness>, read only) and adds what it finds to
# tests/fuzz/work/<harness>/corpus. Fork mode: a crash, sanitizer report, hang (-timeout) or oversized
# allocation (-malloc_limit_mb) is kept there as crash-*/timeout-*/oom-* and fuzzing goes on. Each sanitizer
# report is judged as the run wrote it (log_path: work/<harness>/report.<pid>), and each finding is also
# replayed alone: a heap over-read that hit a redzone mid-campaign may land in valid memory alone (CI, 28
# November: such a crash failed the run as "at ?"). An rss-limit stop is judged by where its oversized
# allocation was asked for. A finding in the HDF5 library (a damaged file that HDF5 itself cannot survive,
# the upstream problem shard manifests address) is listed as known; anywhere else it fails the run. The
# inputs of tests/fuzz/regressions/<harness> (crashes found before, fixed) are replayed first and must pass.
set -u
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
# detect_leaks=0: a rejected input ends in die(), which the harness turns into a return; what that path
# leaves allocated is released by exit() in the program, so it is not a leak (fuzz_common.h).
# allocator_may_return_null: a size read from a damaged file (HDF5 asks malloc for 2^64 bytes) gets NULL,
# as from glibc, instead of an ASan report; the caller's handling of that is what is under test.
# Set here, not inherited: a --enable-sanitizers build's test environment has options of its own.
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export ASAN_OPTIONS
status=0

# The first frame of a report in HDF5 or in our sources (past libc and the sanitizer runtime, which is
# linked into the harness binary).
first_frame() {
  grep -E '^ +#[0-9]+ 0x' "$1" | grep -v -E "\(.*/fuzz_[a-z]+\+0x" | grep -m1 -E 'libhdf5|/src/|/tests/' |
    sed 's/^ *#[0-9]* 0x[0-9a-f]* *//; s/^in //; s/ *(BuildId.*//'
}

sanitizer_error='ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error'

# judge HARNESS NAME LOG: known when LOG's first frame is in HDF5, else a finding (fails the run).
judge() {
  frame=$(first_frame "$3")
  what=$(grep -m1 -E "$sanitizer_error|deadly signal|timeout|out-of-memory" "$3" | sed 's/^==[0-9]*==//')
  case $frame in
    *libhdf5*) echo "fuzz: $1: known upstream, inside HDF5: $2: $what at $frame" ;;
    *) echo "fuzz: $1: FINDING $2: $what at ${frame:-?} (report: $3)" >&2; status=1 ;;
  esac
}

for h in "$@"; do
  bin=$build/fuzz_$h work=tests/fuzz/work/$h
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (make fuzz-build)" >&2; exit 1; }
  mkdir -p "$work/corpus"
  set -- -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512
  [ -f "$here/$h.dict" ] && set -- "$@" -dict="$here/$h.dict"
  if [ -d "$here/regressions/$h" ]; then
    "$bin" "$@" "$here/regressions/$h"/* >"$work/regressions.log" 2>&1 \
      || { tail -n 40 "$work/regressions.log"; echo "fuzz: $h: a regression input fails again" >&2; status=1; }
  fi
  echo "fuzz: $h for ${seconds}s (log: $work/fuzz.log)"
  rm -f "$work"/report.*
  ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$work/report UBSAN_OPTIONS=log_path=$work/report:print_stacktrace=1 \
  "$bin" "$@" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -artifact_prefix="$work/" \
    -max_total_time="$seconds" "$work/corpus" "$here/corpus/$h" >"$work/fuzz.log" 2>&1
  # (its exit status is 1 once a job found something: the findings are judged below)
  grep -q '^INFO: exiting' "$work/fuzz.log" || { tail -n 30 "$work/fuzz.log"; echo "fuzz: $h: libFuzzer failed" >&2; status=1; }
  grep -E '^#[0-9]+: cov' "$work/fuzz.log" | tail -n 1
  reports=0
  for r in "$work"/report.*; do
    grep -q -E "$sanitizer_error" "$r" 2>/dev/null || continue # libFuzzer's own oom/hang notes: below
    reports=$((reports + 1))
    judge "$h" "$r" "$r"
  done
  for f in "$work"/crash-* "$work"/timeout-* "$work"/oom-*; do
    case $f in *.log) continue ;; esac # a replay's report, from a run before this one
    [ -f "$f" ] || continue
    if "$bin" -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 "$f" >"$f.log" 2>&1; then
      # A hang that does not repeat alone is a job starved on a loaded machine; an rss limit that does not
      # is what rejected inputs left allocated over a long job (die() paths, see fuzz_common.h). A crash
      # that does not is judged by the run's own sanitizer reports above; with none, it is a finding.
      case $f in
        */timeout-*|*/oom-*) echo "fuzz: $h: $f: does not repeat alone (took $(sed -n 's/^Executed .* in //p' "$f.log"))"
                             continue ;;
        */crash-*) [ "$reports" -gt 0 ] && { echo "fuzz: $h: $f: does not repeat alone (judged by the reports above)"; continue; }
                   echo "fuzz: $h: FINDING $f: a crash with no sanitizer report, not repeating alone" >&2; status=1; continue ;;
      esac
    fi
    case $f in
      # An rss-limit stop names no frame: replayed with any allocation over 512 MB an ASan report, it names
      # the code that asked for it (HDF5 asks for what a damaged file claims, say 16 GB for its metadata cache).
      */oom-*) ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=0:max_allocation_size_mb=512 \
                 "$bin" -detect_leaks=0 -timeout=10 -rss_limit_mb=2048 "$f" >>"$f.log" 2>&1 ;;
    esac
    judge "$h" "$f" "$f.log"
  done
done
exit $status
