#!/bin/sh
# The device is chosen before MPI_Init from the launcher's local rank (a CUDA-aware MPI may create a context
# inside MPI_Init), and MPI's node-local rank must agree with it afterwards: mnist_ddp on 2 ranks with the
# simulated CUDA runtime (tests/gpu/gpu_mock_train reports the device bound when MPI_Init began). No GPU needed.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_train
[ -x "$P" ] || skip "tests/gpu/gpu_mock_train not built (GPU build only)"
need_data
small_mnist "$TMP/small" 64 16
RUN_TIMEOUT=120
run="--data $TMP/small --seed 0 --batch-size 4 --test-batch-size 16 --epochs 1 --max-steps 1"

# bound_at_init WANT0 WANT1: what each rank had bound when MPI_Init began.
bound_at_init() {
  for r in 0 1; do
    eval "want=\$$((r + 1))"
    grep -q "rank $r: device $want bound before MPI_Init" "$TMP/out" ||
      { cat "$TMP/out" "$TMP/err" >&2; fail "$case: rank $r did not have device $want bound at MPI_Init"; }
  done
  echo "ok: $case"
}

case="mpirun (OMPI_COMM_WORLD_LOCAL_RANK)"
# shellcheck disable=SC2086
run_np 2 "$P" --device cuda $run >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err" >&2; fail "$case"; }
bound_at_init 0 1

case="--device cpu: no context before MPI_Init"
# shellcheck disable=SC2086
run_np 2 "$P" --device cpu $run >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err" >&2; fail "$case"; }
bound_at_init -1 -1

# Another launcher's variable (Open MPI's removed): MPI_LOCALRANKID right, then swapped between the ranks.
case="MPI_LOCALRANKID"
# shellcheck disable=SC2016,SC2086
run_np 2 sh -c 'unset OMPI_COMM_WORLD_LOCAL_RANK; MPI_LOCALRANKID=$OMPI_COMM_WORLD_RANK exec "$@"' sh \
  "$P" --device cuda $run >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/out" "$TMP/err" >&2; fail "$case"; }
bound_at_init 0 1

# shellcheck disable=SC2016,SC2086
expect_fail 78 "MPI_LOCALRANKID=1 chose GPU 1 before MPI_Init, but its node-local MPI rank 0 chooses GPU 0" \
  timeout -k 10 120 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 \
  sh -c 'unset OMPI_COMM_WORLD_LOCAL_RANK; MPI_LOCALRANKID=$((1 - OMPI_COMM_WORLD_RANK)) exec "$@"' sh \
  "$P" --device cuda $run
n=$(grep -c 'error:' "$TMP/err" || true)
[ "$n" -eq 1 ] || { cat "$TMP/err" >&2; fail "$n error lines for the disagreement, expected 1"; }
echo "ok: a launcher local rank that MPI contradicts stops the job (78, one line)"
