#!/bin/sh
# A stalled job names its culprits (src/comm/stall.c). With 4 and 8 ranks (oversubscribed), whichever ranks
# stop answering (rank 0, a middle one, the last, two at once, five), leave early, skip a step or die:
# exit 69 within the deadline plus the 5 s window, and one error line, from the lowest rank that answered,
# naming the ranks that did not answer (rank, host, pid; by host when many) and where the others waited
# (collective, step, bucket), or the rank a step ahead. A killed rank ends the job at once (the launcher
# names it). The trainer with rank 0 frozen by SIGSTOP says the same; SIGUSR2 makes every rank of a training
# job print one status line while the job goes on to exit 0.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
P=$abs_top_builddir/tests/integration/comm_fail
[ -x "$P" ] || fail "tests/integration/comm_fail not built"
RUN_TIMEOUT=45 # a job ends within 20 s; mpirun hung after MPI_Abort is killed sooner (lib.sh: launcher_failed)
host=$(hostname)
mkdir "$TMP/pids"
# Each rank records its PID (exec keeps it) in $TMP/pids/RANK.
with_pids() { rm -f "$TMP"/pids/*; run_np "$@"; }
# shellcheck disable=SC2016
record='echo $$ >"$0/$OMPI_COMM_WORLD_RANK"; exec "$@"'

# culprits R,R..: how the line names these ranks ("rank 1 (host, pid 42)", "ranks 1 (..), 3 (..)").
culprits() {
  n=0 out=
  for r in $(echo "$1" | tr , ' '); do
    out="$out${out:+, }$r ($host, pid $(cat "$TMP/pids/$r"))"
    n=$((n + 1))
  done
  [ "$n" -eq 1 ] && echo "rank $out" || echo "ranks $out"
}

# the_line SPEAKER NP TEXT: one error line in $TMP/err, from rank SPEAKER, containing TEXT.
the_line() {
  n=$(grep -c ': error: ' "$TMP/err" || true)
  [ "$n" -eq 1 ] || { cat "$TMP/err" >&2; fail "$n error lines, expected 1"; }
  grep ': error: ' "$TMP/err" | grep -qF -- "$3" || { cat "$TMP/err" >&2; fail "the line does not say: $3"; }
  grep ': error: ' "$TMP/err" | grep -qF -- "[rank $1/$2 on $host, " || { cat "$TMP/err" >&2; fail "not said by rank $1"; }
}

# stalled NP HOW RANKS SPEAKER NAMED WAITING: comm_fail HOW with a 1 s deadline on NP ranks, RANKS odd.
stalled() {
  np=$1 how=$2 odd=$3 speaker=$4 named=$5 waiting=$6
  expect_fail 69 'did not complete within --comm-timeout 1 s: ' with_pids "$np" sh -c "$record" "$TMP/pids" \
    "$P" "$how" 1 "$odd"
  [ "$expect_s" -le 20 ] || fail "$how $odd: the job took $expect_s s to end (deadline 1 s, window 5 s)"
  case $named in *'$CULPRITS'*) named=$(echo "$named" | sed "s|\\\$CULPRITS|$(culprits "$odd")|") ;; esac
  the_line "$speaker" "$np" "$named$waiting"
}

gone=" did not answer (frozen, dead, or busy outside mnist_ddp's collectives); "
stalled 4 stall 0 1 "\$CULPRITS$gone" "ranks 1-3 were waiting in gradient all-reduce at step 3, bucket 1 of 4"
stalled 4 stall 2 0 "\$CULPRITS$gone" "ranks 0-1,3 were waiting in gradient all-reduce at step 3, bucket 1 of 4"
stalled 4 stall 3 0 "\$CULPRITS$gone" "ranks 0-2 were waiting in gradient all-reduce at step 3"
stalled 4 stall 1,2 0 "\$CULPRITS$gone" "ranks 0,3 were waiting in gradient all-reduce at step 3"
stalled 8 stall 0,7 1 "\$CULPRITS$gone" "ranks 1-6 were waiting in gradient all-reduce at step 3"
stalled 8 stall 4 0 "\$CULPRITS$gone" "ranks 0-3,5-7 were waiting in gradient all-reduce at step 3"
# Four, the most named one by one (stall.c's NAMED), and one more: by host, without pids.
stalled 8 stall 1,2,3,5 0 "\$CULPRITS$gone" "ranks 0,4,6-7 were waiting in gradient all-reduce at step 3"
stalled 8 stall 1,2,3,5,6 0 "ranks 1-3,5-6 on $host$gone" "ranks 0,4,7 were waiting in gradient all-reduce at step 3"
# A rank that left the loop early (waiting in a barrier on the world, as in MPI_Finalize) answers nothing either.
stalled 4 leave 3 0 "\$CULPRITS$gone" "ranks 0-2 were waiting in gradient all-reduce at step 3"
# A rank that skipped step 3 reaches the closing sum while the others wait in the last step's all-reduce; its
# own deadline there is 60 s, so it answers their notice (and rank 0 speaks while its deadline is far).
stalled 4 skip 2 0 "ranks diverged: \$CULPRITS in closing sum at step 5, while " \
  "ranks 0-1,3 were waiting in gradient all-reduce at step 4, bucket 1 of 4"
stalled 8 skip 0 0 "ranks diverged: \$CULPRITS in closing sum at step 5, while " \
  "ranks 1-7 were waiting in gradient all-reduce at step 4"
# A tie, two places with two ranks each: the group of the lowest rank is the one the others are set against.
stalled 4 skip 2,3 0 "ranks diverged: \$CULPRITS in closing sum at step 5, while " \
  "ranks 0-1 were waiting in gradient all-reduce at step 4"

# A killed rank: the launcher ends the job at once and names rank and node.
t0=$(date +%s)
set +e
run_np 4 "$P" kill 1 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "kill: exit 0"
[ $(($(date +%s) - t0)) -le 20 ] || fail "kill: the job did not end within 20 s"
grep -q "process rank 2 .* on node $host exited on signal 9" "$TMP/err" || { cat "$TMP/err" >&2; fail "kill: rank 2 not named"; }
echo "ok: killed rank: exit $rc, '$(grep -m1 'process rank 2' "$TMP/err")'"

# The trainer, rank 0 frozen after the first step (rank 1 speaks), and the status line on SIGUSR2.
train="--data $MNIST_DATA --epochs 1 --log-interval 1 --verbose --threads 1"
# shellcheck disable=SC2086
with_pids 4 sh -c "$record" "$TMP/pids" "$MNIST_DDP" $train --step-timeout 3 >"$TMP/train.out" 2>"$TMP/err" &
job=$!
cleanup() {
  [ ! -s "$TMP/pids/0" ] || kill -KILL "$(cat "$TMP/pids/0")" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
i=0
until grep -q '^\[rank 0\] epoch 1 step 1/' "$TMP/train.out" && [ -s "$TMP/pids/0" ]; do
  i=$((i + 1))
  [ "$i" -le 900 ] || { cat "$TMP/train.out" "$TMP/err" >&2; fail "the trainer did not start within 90 s"; }
  sleep 0.1
done
kill -STOP "$(cat "$TMP/pids/0")"
set +e
wait "$job"
rc=$?
set -e
[ "$rc" -eq 69 ] || { cat "$TMP/train.out" "$TMP/err" >&2; fail "frozen rank 0: exit $rc, expected 69"; }
# Open MPI sends SIGCONT before it kills: rank 0 may wake and say something too; rank 1 speaks first.
grep ': error: ' "$TMP/err" | grep -v '\[rank 0/4 ' >"$TMP/err1" || true
mv "$TMP/err1" "$TMP/err"
the_line 1 4 "did not complete within --step-timeout 3 s: $(culprits 0)$gone"
echo "ok: frozen trainer rank 0: $(grep -m1 ': error: ' "$TMP/err")"

# SIGUSR2 to each rank, as scancel -s USR2 does (mpirun forwards it too).
# shellcheck disable=SC2086
with_pids 2 sh -c "$record" "$TMP/pids" "$MNIST_DDP" $train --max-steps 200 --log-interval 50 \
  >"$TMP/train.out" 2>"$TMP/err" &
job=$!
i=0
until grep -q 'step 50/' "$TMP/train.out" && [ -s "$TMP/pids/1" ]; do
  i=$((i + 1))
  [ "$i" -le 900 ] || { cat "$TMP/train.out" "$TMP/err" >&2; fail "the trainer did not reach step 50 within 90 s"; }
  sleep 0.1
done
kill -USR2 "$(cat "$TMP/pids/0")" "$(cat "$TMP/pids/1")"
wait "$job" || { cat "$TMP/train.out" "$TMP/err" >&2; fail "SIGUSR2 ended the job"; }
for r in 0 1; do
  grep -q "^mnist_ddp: status: rank $r/2 on $host (pid [0-9]*): step [0-9]*, [a-z -]* for [0-9]*\.[0-9][0-9][0-9] s$" \
    "$TMP/err" || { cat "$TMP/err" >&2; fail "no status line from rank $r"; }
done
grep -q "^\[rank 0\] summary: " "$TMP/train.out" || { tail -5 "$TMP/train.out"; fail "the job did not finish after SIGUSR2"; }
echo "ok: SIGUSR2: $(grep -m1 'status: rank 0' "$TMP/err"); training went on"
