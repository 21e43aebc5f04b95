#!/bin/sh
# The collectives' failures end the job with the right status and one line, and never hang
# (tests/integration/comm_fail.c for the scenarios):
# - one rank's parameters differ by one bit: 70, rank 0 names that rank (2 and 3 ranks);
# - a failing MPI call: 70 and our one line naming the call (MPI_ERRORS_RETURN), not Open MPI's banner;
# - a rank sleeps or leaves instead of joining the gradient all-reduce: the others stop with 69 at the
#   --comm-timeout deadline, not before it;
# - the trainer with rank 1 frozen (SIGSTOP) once training has begun, without --comm-timeout (its 300 s
#   start-up bound): 69 at the --step-timeout deadline, rank 0 naming the option and rank 1, and the frozen
#   rank does not outlive the job; --help gives that deadline's default, 60 s.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
P=$abs_top_builddir/tests/integration/comm_fail
[ -x "$P" ] || fail "tests/integration/comm_fail not built"
# Far below comm_fail's 120 s sleep: a missed deadline is a failure, not a stuck job.
RUN_TIMEOUT=60

# one_line: the error was printed once, not by every rank.
one_line() {
  n=$(grep -c ': error: ' "$TMP/err" || true)
  [ "$n" -eq 1 ] || { cat "$TMP/err" >&2; fail "$n error lines, expected 1"; }
}

expect_fail 70 'replicas diverged after step 7: the parameters of rank 1 differ' run_np 2 "$P" diverge 1
one_line
expect_fail 70 'replicas diverged after step 7: the parameters of rank 2 differ' run_np 3 "$P" diverge 2
one_line
# A model-sized replica that differs in its last parameter only: the whole buffer is compared.
expect_fail 70 'replicas diverged after step 7: the parameters of rank 1 differ' run_np 2 "$P" diverge-last 1
one_line

# A failing MPI call comes back to MPI_CHECK: our line and status, on the world and node communicators.
for comm in W L; do
  expect_fail 70 'MPI_Send(&x, 1, MPI_INT, size + 1, 0, comm) failed: MPI_ERR_RANK' run_np 2 "$P" mpierr "$comm"
  one_line
done

for how in stall leave; do
  t0=$(date +%s)
  expect_fail 69 'gradient all-reduce at step 3 did not complete within --comm-timeout 2 s' run_np 2 "$P" "$how" 2
  [ $(($(date +%s) - t0)) -ge 2 ] || fail "$how: stopped before the 2 s deadline"
  one_line
  # Rank 0 fails alone, its peer asleep or gone: its MPI_Abort ends the job (2 ranks, the smallest world that
  # needs it), without the watchdog's note that the call did not return.
  ! grep -q 'did not return within' "$TMP/err" || { cat "$TMP/err" >&2; fail "$how: the failing rank's abort did not end the job"; }
done

# The default steady-state deadline (the frozen run below sets a short one to stay quick).
"$MNIST_DDP" --help | grep -A1 -- '^  --step-timeout S ' | grep -q '\[60\]$' || fail "--help: no --step-timeout default of 60 s"

# The trainer: rank 1 records its PID and becomes mnist_ddp (exec keeps the PID). It is frozen after its
# first progress line (--log-interval 1, --verbose), so the first step is over on both ranks; the later
# steps' only collective is the gradient all-reduce (progress lines need every rank too, but rank 0
# reaches the all-reduce of the next step first), so rank 0 must be stopped by the step deadline.
pidfile=$TMP/rank1.pid
# If the test fails half-way, the frozen rank must not be left behind (its PID, if it is still ours).
cleanup() {
  if [ -s "$pidfile" ] && [ "$(ps -o comm= -p "$(cat "$pidfile")")" = mnist_ddp ]; then
    kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
# shellcheck disable=SC2016
run_np 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" != 1 ] || echo $$ >"$0"; exec "$@"' "$pidfile" \
  "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --log-interval 1 --step-timeout 3 --verbose \
  >"$TMP/train.out" 2>"$TMP/train.err" &
job=$!
i=0
until grep -q '^\[rank 1\] epoch 1 step 1/' "$TMP/train.out" && [ -s "$pidfile" ]; do
  i=$((i + 1))
  [ "$i" -le 600 ] || { cat "$TMP/train.out" "$TMP/train.err" >&2; fail "the trainer did not start within 60 s"; }
  sleep 0.1
done
kill -STOP "$(cat "$pidfile")"
t0=$(date +%s)
set +e
wait "$job"
rc=$?
set -e
[ "$rc" -eq 69 ] || { cat "$TMP/train.out" "$TMP/train.err" >&2; fail "frozen rank: exit $rc, expected 69"; }
[ $(($(date +%s) - t0)) -ge 3 ] || fail "frozen rank: stopped before the 3 s deadline"
# One line from rank 0, naming the deadline and rank 1. Open MPI sends SIGCONT before it kills, so rank 1,
# if frozen in its own wait, may wake past its deadline and say so too; no other error line.
deadline='did not complete within --step-timeout 3 s: '
n=$(grep -c ": error: .*${deadline}rank 1 ($(hostname), pid $(cat "$pidfile")) did not answer.*\[rank 0/2 " "$TMP/train.err" || true)
[ "$n" -eq 1 ] || { cat "$TMP/train.err" >&2; fail "frozen rank: $n deadline lines from rank 0, expected 1"; }
if grep ': error: ' "$TMP/train.err" | grep -v -e "$deadline.*\[rank [01]/2 " >&2; then
  fail "frozen rank: an error line other than the deadline's"
fi
# The job's end takes the frozen rank with it.
i=0
while running "$(cat "$pidfile")"; do
  i=$((i + 1))
  [ "$i" -le 100 ] || fail "the frozen rank outlived the job (state $running_st)"
  sleep 0.1
done
echo "ok: frozen rank 1, exit 69 after $(($(date +%s) - t0)) s, '$(grep -m1 'step-timeout' "$TMP/train.err")'"
