#!/bin/sh
# One run per checkpoint directory: while a run holds --checkpoint-dir, a second one (2 ranks) stops before
# training with 73 and names the holder's host and pid; the same command after the holder is SIGKILLed takes
# the directory back at once, with a warning naming the run that ended without releasing it; a lock file
# left by a holder on a node that died (its name, no lock) is taken over the same way; a clean exit leaves
# nothing to warn about.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/small" 200 100
dir=$TMP/ckpt lock=$TMP/ckpt/mnist_ddp.lock
host=$(hostname)
common="--data $TMP/small --batch-size 16 --threads 1 --checkpoint-dir $dir"

# The holder: a singleton run (its pid is $!) that trains until it is killed (by the trap at the latest).
# shellcheck disable=SC2086
"$MNIST_DDP" $common --epochs 100000 >"$TMP/holder.log" 2>&1 &
holder=$!
trap 'kill -9 $holder 2>/dev/null || true' EXIT
i=0
until grep -q "pid $holder " "$lock" 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -le 300 ] || { cat "$TMP/holder.log"; fail "the holder did not take the lock within 30 s"; }
  kill -0 "$holder" 2>/dev/null || { cat "$TMP/holder.log"; fail "the holder ended early"; }
  sleep 0.1
done
# shellcheck disable=SC2086
expect_fail 73 "checkpoint-dir $dir is in use by another run (host $host pid $holder since " \
  run_np 2 "$MNIST_DDP" $common --epochs 1
! grep -q "^epoch\|^resume" "$TMP/out" || { cat "$TMP/out"; fail "the second run resumed or trained before it stopped"; }

kill -9 "$holder"
wait "$holder" 2>/dev/null || true
grep -q "pid $holder " "$lock" || fail "the killed holder's name is not left in $lock"
# shellcheck disable=SC2086
run_np 1 "$MNIST_DDP" $common --epochs 1 --max-steps 2 >"$TMP/again.log" 2>&1 ||
  { cat "$TMP/again.log"; fail "the same command after SIGKILL did not take the directory back"; }
grep -q "taking over from a run that ended without releasing it (host $host pid $holder since " "$TMP/again.log" ||
  { cat "$TMP/again.log"; fail "no warning naming the killed holder"; }
[ ! -s "$lock" ] || { cat "$lock"; fail "a clean exit left its name in $lock"; }
echo "ok: a killed holder's directory is taken back, with a warning"

# A clean exit before: nothing to warn about.
# shellcheck disable=SC2086
run_np 1 "$MNIST_DDP" $common --epochs 1 --max-steps 4 --resume never >"$TMP/clean.log" 2>&1 ||
  { cat "$TMP/clean.log"; fail "a run after a clean exit failed"; }
! grep -q "taking over" "$TMP/clean.log" || { cat "$TMP/clean.log"; fail "a warning after a clean exit"; }

# A holder on a node that died: its name in the file, no lock (the node's locks went with it).
echo "host node-that-died pid 4242 Slurm job 77 since 2026-01-01 00:00:00" >"$lock"
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $common --epochs 1 --max-steps 2 --resume never >"$TMP/stale.log" 2>&1 ||
  { cat "$TMP/stale.log"; fail "a stale lock file stopped the run"; }
[ "$(grep -c 'taking over from a run that ended without releasing it (host node-that-died pid 4242 Slurm job 77 ' \
  "$TMP/stale.log")" -eq 1 ] || { cat "$TMP/stale.log"; fail "not one warning naming the dead node's holder"; }
echo "ok: a stale lock file is taken over with one warning"
