#!/bin/sh
# No hang anywhere: a rank frozen (SIGSTOP) in any phase of a run ends the job with 69 within its deadline
# + 15 s, and the one error line names the frozen rank. Each phase at 2 and 4 ranks, the frozen rank chosen
# by MNIST_DDP_FREEZE (stall.h), which says when it froze: the clock starts there. MPI's own start-up
# (a rank stopped before MPI_Init) ends at --comm-timeout through the watchdog. Then the case as a user
# meets it: rank 1 frozen from outside the moment rank 0 prints an epoch's last step, as evaluation starts. A
# rank stopped after MPI_Finalize, when no peer is left to notice, ends through its watcher.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
RUN_TIMEOUT=60
C=5 S=3 # --comm-timeout, --step-timeout
host=$(hostname)
small_mnist "$TMP/data" 512 256 # 4 steps per epoch on 2 ranks, 2 on 4
args="--data $TMP/data --epochs 2 --threads 1 --log-interval 1 --comm-timeout $C --step-timeout $S"
# deadline PHASE: the option that bounds a wait in PHASE, and its seconds. After the first step the ranks
# arrive at the stop agreement, replica checks and evaluation as together as at a step.
deadline() {
  case $1 in
  "stop agreement" | "replica check" | evaluation) echo "--step-timeout $S" ;;
  *) echo "--comm-timeout $C" ;;
  esac
}
gone=" did not answer (frozen, dead, or busy outside mnist_ddp's collectives); "

# ended_within START LIMIT: the job's end came within LIMIT s of START (now's nanoseconds).
ended_within() {
  took=$(( ($(now) - $1) / 1000000 ))
  [ "$took" -le $(($2 * 1000)) ] || { cat "$TMP/err" >&2; fail "$what: the job took $took ms after the freeze (limit $2 s)"; }
}

# await_freeze RANK PHASE TRIES: until the test hook says RANK froze in PHASE, polled every 50 ms; fails $what
# if the job $job ends first or TRIES polls pass.
await_freeze() {
  i=0
  until grep -q "test: rank $1 frozen in $2" "$TMP/err"; do
    i=$((i + 1))
    kill -0 "$job" 2>/dev/null && [ "$i" -le "$3" ] || { wait "$job"; cat "$TMP/out" "$TMP/err" >&2; fail "$what: never froze"; }
    sleep 0.05
  done
}

# frozen NP RANK PHASE: rank RANK of NP freezes entering PHASE; the job ends in time, naming it.
frozen() {
  np=$1 victim=$2 phase=$3 what="$1 ranks, rank $2 frozen in $3"
  rm -rf "$TMP/ckpt"
  set +e
  # shellcheck disable=SC2086
  MNIST_DDP_FREEZE="$victim:$phase" run_np "$np" "$MNIST_DDP" $args --checkpoint-dir "$TMP/ckpt" \
    --checkpoint-every 1 >"$TMP/out" 2>"$TMP/err" &
  job=$!
  await_freeze "$victim" "$phase" 600
  t0=$(now)
  wait "$job"
  rc=$?
  set -e
  if [ "$rc" -ne 69 ] && launcher_failed "$rc" "$TMP/err"; then
    echo "note: $what: mpirun itself failed to end the job after MPI_Abort (exit $rc; an Open MPI defect)"
    return 0
  fi
  [ "$rc" -eq 69 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "$what: exit $rc, expected 69"; }
  set -- $(deadline "$phase")
  ended_within "$t0" $(($2 + 15))
  # Open MPI may wake the frozen rank (SIGCONT) before it kills it: its own words do not count.
  grep ': error: ' "$TMP/err" | grep -v "\[rank $victim/$np " >"$TMP/lines" || true
  [ "$(wc -l <"$TMP/lines")" -eq 1 ] || { cat "$TMP/err" >&2; fail "$what: $(wc -l <"$TMP/lines") error lines, expected 1"; }
  grep -q "did not complete within $1 $2 s: rank $victim ($host, pid [0-9]*)$gone" "$TMP/lines" ||
    { cat "$TMP/err" >&2; fail "$what: the line does not name rank $victim as not answering within $1 $2 s"; }
  echo "ok: $what: exit 69 in $took ms: $(sed 's/ \[rank.*//' "$TMP/lines")"
}

for phase in starting training "stop agreement" "checkpoint write" "replica check" evaluation shutdown; do
  frozen 2 1 "$phase"
  frozen 4 2 "$phase"
done
frozen 4 0 evaluation

# A rank stopped after MPI_Finalize, every peer gone: only its watcher (src/comm/exit_watch.c) is left to end
# it, at --comm-timeout, with one line; the peer ended normally, so the job's code is the launcher's.
for np in 2 4; do
  what="$np ranks, rank 1 stopped after MPI_Finalize"
  set +e
  # shellcheck disable=SC2086
  MNIST_DDP_FREEZE="1:finished" run_np "$np" "$MNIST_DDP" $args >"$TMP/out" 2>"$TMP/err" &
  job=$!
  await_freeze 1 finished 1200
  t0=$(now)
  wait "$job"
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "$what: exit 0"; }
  ended_within "$t0" $((C + 15))
  grep ': error: ' "$TMP/err" | grep -v '^mnist_ddp: test:' >"$TMP/lines" || true
  grep -q "^mnist_ddp: error: rank 1 ($host, pid [0-9]*) stayed stopped for --comm-timeout $C s while finishing (in or after MPI_Finalize, its peers gone): killed so that the job ends$" "$TMP/lines" ||
    { cat "$TMP/err" >&2; fail "$what: no line naming rank 1 as stopped while finishing"; }
  [ "$(grep -c 'stayed stopped' "$TMP/lines")" -eq 1 ] || { cat "$TMP/err" >&2; fail "$what: not one line"; }
  echo "ok: $what: exit $rc in $took ms: $(grep -m1 'stayed stopped' "$TMP/lines")"
done

# A rank stopped before MPI_Init: the others wait in MPI's start-up, which has no deadline of its own.
for np in 2 4; do
  what="$np ranks, rank 1 stopped before MPI_Init"
  t0=$(now)
  set +e
  # shellcheck disable=SC2016,SC2086
  run_np "$np" sh -c '[ "$OMPI_COMM_WORLD_RANK" != 1 ] || kill -STOP $$; exec "$@"' sh "$MNIST_DDP" $args \
    >"$TMP/out" 2>"$TMP/err"
  rc=$?
  set -e
  [ "$rc" -eq 69 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "$what: exit $rc, expected 69"; }
  ended_within "$t0" $((C + 15))
  grep -q "^mnist_ddp: error: MPI start-up (MPI_Init) did not complete within --comm-timeout $C s: " "$TMP/err" ||
    { cat "$TMP/err" >&2; fail "$what: no line about MPI's start-up"; }
  echo "ok: $what: exit 69 in $took ms: $(grep -m1 'MPI start-up' "$TMP/err")"
done

# From outside, as in a user's job: full MNIST, rank 1 stopped when rank 0 prints the epoch's last step.
mkdir "$TMP/pids"
# shellcheck disable=SC2016,SC2086
run_np 2 sh -c 'echo $$ >"$0/$OMPI_COMM_WORLD_RANK"; exec "$@"' "$TMP/pids" "$MNIST_DDP" --data "$MNIST_DATA" \
  --epochs 1 --threads 1 --log-interval 469 --comm-timeout 8 --step-timeout 8 >"$TMP/out" 2>"$TMP/err" &
job=$!
i=0
until grep -q 'step 469/469' "$TMP/out"; do
  i=$((i + 1))
  kill -0 "$job" 2>/dev/null && [ "$i" -le 3000 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "epoch 1 did not end"; }
  sleep 0.02
done
kill -STOP "$(cat "$TMP/pids/1")"
t0=$(now)
set +e
wait "$job"
rc=$?
set -e
what="rank 1 frozen as evaluation starts"
[ "$rc" -eq 69 ] || { cat "$TMP/out" "$TMP/err" >&2; fail "$what: exit $rc, expected 69"; }
ended_within "$t0" 23
grep -q "rank 1 ($host, pid $(cat "$TMP/pids/1"))$gone" "$TMP/err" || { cat "$TMP/err" >&2; fail "$what: rank 1 not named"; }
echo "ok: $what: exit 69 in $took ms: $(grep -m1 ': error: ' "$TMP/err" | sed 's/ \[rank.*//')"
