#!/bin/sh
# src/gpu/gpu_mpi.c on 2 MPI ranks with the simulated CUDA runtime and NCCL (tests/gpu/gpu_mock_host.c):
# device agreement (--device auto/cuda), the duplicate-GPU check, the start-up table, the NCCL unique-ID
# broadcast, and the bootstrap address (--bootstrap-addr, NCCL_COMM_ID, port in use, wrong host).
# Every failure: the right exit status on every rank, one line, no hang. No GPU needed.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_host
[ -x "$P" ] || skip "tests/gpu/gpu_mock_host not built (GPU build only)"
RUN_TIMEOUT=120
# expect_fail runs its command under timeout(1), which cannot run a shell function: mpirun itself.
MPI2="${MPIEXEC:-mpirun} --oversubscribe -np 2"

# expect_ok SCENARIO PATTERN...: exit 0 and stdout names every PATTERN.
expect_ok() {
  sc=$1; shift
  run_np 2 "$P" "$sc" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err" >&2; fail "scenario $sc"; }
  for pattern in "$@"; do
    grep -q -e "$pattern" "$TMP/out" || { cat "$TMP/out" >&2; fail "scenario $sc: stdout lacks '$pattern'"; }
  done
  echo "ok: $sc"
}

# one_line: the error was printed once (rank 0), not by every rank.
one_line() {
  n=$(grep -c 'error:' "$TMP/err" || true)
  [ "$n" -eq 1 ] || { cat "$TMP/err" >&2; fail "$n error lines, expected 1"; }
}

expect_ok ok 'pci bus id' '0000:10:00.0' '0000:11:00.0' 'device cuda:0 (0000:10:00.0)' 'NCCL chooses' \
  'NCCL communicator: 2 ranks' 'scenario passed'
expect_fail 78 'only 1 GPU visible' $MPI2 "$P" oversubscribed
grep -q -e '--ntasks-per-node=1' "$TMP/err" || fail "no fix named for 2 ranks on 1 GPU"
one_line
expect_fail 78 'would share GPU 0000:10:00.0' $MPI2 "$P" shared
grep -q -e '--gpus-per-task=1' "$TMP/err" || fail "no fix named for a shared GPU"
one_line
expect_ok auto-no-gpu 'device auto: no usable GPU on rank 1 on .*no NVIDIA driver.*training on the CPU'
expect_fail 69 '--device cuda: no usable GPU on rank 1 on' $MPI2 "$P" cuda-no-gpu
one_line
expect_fail 69 'is in use' $MPI2 "$P" port-in-use
one_line
expect_ok option 'rank 0 listens on 127.0.0.1:[0-9]* (--bootstrap-addr; NCCL_COMM_ID set' 'scenario passed'
expect_ok env-wins 'from NCCL_COMM_ID in the environment, which takes precedence over --bootstrap-addr 127.0.0.1:1' \
  'scenario passed'
if [ "$(cat /proc/sys/net/ipv4/ip_nonlocal_bind 2>/dev/null || echo 0)" = 0 ]; then
  expect_fail 78 'is not an address of' $MPI2 "$P" bad-host
  one_line
fi
