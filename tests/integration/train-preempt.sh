#!/bin/sh
# Preemption (src/comm/preempt.c): SIGUSR1 to one rank of a 2-rank run stops both at the next step boundary with a
# checkpoint and exit 75; the same command then resumes and ends with the parameters of a run that was never
# stopped, bit for bit. A rank killed with SIGKILL ends the job; the same command resumes from the last
# periodic checkpoint and ends the same way.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 1000 samples, 2 ranks x 16: 32 steps per epoch, long enough to signal a run in its second epoch.
small_mnist "$TMP/data" 1000 50
common="--data $TMP/data --batch-size 16 --epochs 2 --log-interval 1 --seed 7"
# Periodic checkpoints every 8 steps, but not in the runs stopped by a signal: there the only checkpoint at
# the stop step is the one the stop writes (a periodic one could stand in for it).
every8="--checkpoint-every 8" never="--checkpoint-every 100000"

train() { # train NAME OPTIONS...: 2 ranks, output in $TMP/NAME.log, exit status in $rc
  name=$1; shift
  set +e
  # shellcheck disable=SC2086
  run_np 2 "$MNIST_DDP" $common "$@" >"$TMP/$name.log" 2>&1
  rc=$?
  set -e
}
same() { same_model "$1" "$2" || fail "$1 and $2 differ"; } # same A B: the model files hold the same bits
# until_log NAME PATTERN: waits (at most a minute) for a line of $TMP/NAME.log to match PATTERN.
until_log() {
  i=0
  until grep -q "$2" "$TMP/$1.log"; do
    i=$((i + 1)); [ "$i" -lt 3000 ] || { kill "$job"; cat "$TMP/$1.log"; fail "$1: no line '$2'"; }
    sleep 0.02
  done
}
# interrupt NAME SIGNAL EVERY: starts a run (checkpoints as EVERY says), sends SIGNAL to rank 1 once epoch 2 has
# begun, waits; exit status in $rc. Both ranks are frozen (SIGSTOP) the moment epoch 2 is seen and thawed after
# the signal, so that a loaded machine cannot let the run finish between the two.
interrupt() {
  name=$1 sig=$2 every=$3
  # shellcheck disable=SC2086
  timeout -k 10 300 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$MNIST_DDP" $common $every --checkpoint-dir "$TMP/$name" \
    --save-model "$TMP/$name.h5" >"$TMP/$name.log" 2>&1 &
  job=$!
  until_log "$name" "^epoch 1 step 1/"
  launcher=$(pgrep -P "$job")
  ranks=$(pgrep -P "$launcher" | tr '\n' ' ')
  # shellcheck disable=SC2086
  set -- $ranks
  [ $# -eq 2 ] || fail "$name: expected 2 rank processes under the launcher, found '$ranks'"
  until_log "$name" "^epoch 2 step 3/"
  kill -STOP "$1" "$2"
  kill -s "$sig" "$2"
  kill -CONT "$1" "$2" 2>/dev/null || true
  set +e
  wait "$job"
  rc=$?
  set -e
}

train full $every8 --checkpoint-dir "$TMP/full" --save-model "$TMP/full.h5" # checkpoints change nothing
[ "$rc" -eq 0 ] || { cat "$TMP/full.log"; fail "the uninterrupted run failed"; }
steps=$(sed -n 's/^summary: .*, \([0-9]*\) steps,.*/\1/p' "$TMP/full.log")

interrupt usr1 USR1 "$never"
[ "$rc" -eq 75 ] || { cat "$TMP/usr1.log"; fail "SIGUSR1 to one rank: exit $rc, expected 75"; }
grep -q "stopped by SIGUSR1 at step [0-9]*: checkpoint written, exit 75 (run the same command to resume); [0-9.]* s from the signal to the exit" "$TMP/usr1.log" \
  || { cat "$TMP/usr1.log"; fail "no stop line"; }
at=$(sed -n 's/^stopped by SIGUSR1 at step \([0-9]*\):.*/\1/p' "$TMP/usr1.log")
[ "$at" -lt "$steps" ] || fail "the signal came too late to test a stop (step $at of $steps)"
[ -f "$(printf '%s/ckpt-%012d.h5' "$TMP/usr1" "$at")" ] || fail "no checkpoint at step $at"
[ "$(find "$TMP/usr1" -name 'ckpt-*.h5' | wc -l)" -eq 1 ] || fail "checkpoints other than the stop's: $(ls "$TMP/usr1")"
train usr1-again $never --checkpoint-dir "$TMP/usr1" --save-model "$TMP/usr1.h5"
[ "$rc" -eq 0 ] || { cat "$TMP/usr1-again.log"; fail "the resumed run failed"; }
grep -q "resumed from step $at (restart 1)" "$TMP/usr1-again.log" || { cat "$TMP/usr1-again.log"; fail "not resumed"; }
same "$TMP/full.h5" "$TMP/usr1.h5"
echo "ok: SIGUSR1 at step $at -> exit 75, resumed bit-identical: $(grep '^stopped by' "$TMP/usr1.log")"

# SIGINT (an interactive ^C) stops the same way, named as itself: the whole line.
interrupt int INT "$never"
[ "$rc" -eq 75 ] || { cat "$TMP/int.log"; fail "SIGINT to one rank: exit $rc, expected 75"; }
grep -Eq '^stopped by SIGINT at step [0-9]+: checkpoint written, exit 75 \(run the same command to resume\); [0-9.]+ s from the signal to the exit$' "$TMP/int.log" \
  || { cat "$TMP/int.log"; fail "SIGINT: no stop line naming it"; }
echo "ok: SIGINT -> exit 75: $(grep '^stopped by' "$TMP/int.log")"

interrupt kill KILL "$every8"
[ "$rc" -ne 0 ] || fail "a run with a rank killed exited 0"
last=$(find "$TMP/kill" -name 'ckpt-*.h5' | sort | tail -n 1)
[ -n "$last" ] || { cat "$TMP/kill.log"; fail "no periodic checkpoint before the kill"; }
train kill-again $every8 --checkpoint-dir "$TMP/kill" --save-model "$TMP/kill.h5"
[ "$rc" -eq 0 ] || { cat "$TMP/kill-again.log"; fail "the run after the kill failed"; }
grep -q "resumed from step [0-9]* (restart 1): $last" "$TMP/kill-again.log" || { cat "$TMP/kill-again.log"; fail "not resumed from $last"; }
same "$TMP/full.h5" "$TMP/kill.h5"
echo "ok: SIGKILL of rank 1 -> resumed from $last, bit-identical"

# A signal during start-up (MPI_Init, the data): caught from main's first moment, so the run stops at its first
# step with exit 75, not killed by the signal's default action. Rank 0 or 1 (whichever the launcher forked first)
# is frozen as soon as it exists, so the other cannot get through MPI_Init; once that one runs mnist_ddp and
# catches SIGUSR1 (/proc's SigCgt, bit 10), it gets the signal there, and its peer is thawed.
# shellcheck disable=SC2086
timeout -k 10 300 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$MNIST_DDP" $common $never --checkpoint-dir "$TMP/early" \
  --save-model "$TMP/early.h5" >"$TMP/early.log" 2>&1 &
job=$!
i=0
until ranks=$(pgrep -P "$(pgrep -P "$job" | head -n 1)" 2>/dev/null | tr '\n' ' ') && [ "$(echo $ranks | wc -w)" -eq 2 ]; do
  i=$((i + 1)); [ "$i" -lt 3000 ] || { kill "$job"; cat "$TMP/early.log"; fail "early: no 2 rank processes"; }
  sleep 0.01
done
# shellcheck disable=SC2086
set -- $ranks
kill -STOP "$1"
catches_usr1() { # catches_usr1 PID: PID runs mnist_ddp and has a handler for SIGUSR1
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = mnist_ddp ] || return 1
  mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status")
  [ $((0x$mask >> 9 & 1)) -eq 1 ]
}
i=0
until catches_usr1 "$2"; do
  i=$((i + 1)); [ "$i" -lt 2000 ] || { kill -CONT "$1"; kill "$job"; cat "$TMP/early.log"; fail "early: a rank in start-up does not catch SIGUSR1"; }
  sleep 0.01
done
! grep -q '^data:' "$TMP/early.log" || fail "early: the data was read with a rank frozen"
kill -USR1 "$2"
kill -CONT "$1"
set +e
wait "$job"
rc=$?
set -e
[ "$rc" -eq 75 ] || { cat "$TMP/early.log"; fail "SIGUSR1 in start-up: exit $rc, expected 75"; }
grep -q "^stopped by SIGUSR1 at step 1: checkpoint written, exit 75" "$TMP/early.log" || { cat "$TMP/early.log"; fail "early: no stop at step 1"; }
train early-again $never --checkpoint-dir "$TMP/early" --save-model "$TMP/early.h5"
[ "$rc" -eq 0 ] || { cat "$TMP/early-again.log"; fail "the run resumed after a start-up signal failed"; }
same "$TMP/full.h5" "$TMP/early.h5"
echo "ok: SIGUSR1 during start-up -> stop at step 1, exit 75, resumed bit-identical"
