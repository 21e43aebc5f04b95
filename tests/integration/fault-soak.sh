#!/bin/sh
# A seeded fault soak: a checkpointed run restarted with the same command until it finishes (then a new one),
# each start hit at a random moment by one fault: SIGUSR1 or SIGSTOP to a random rank, kill -9 of a rank or of
# mpirun, SIGTERM to mpirun (none where the start ends first). Asserted: no start outlives its bound (no
# hang), no rank outlives its job, no checkpoint is ever found damaged, and each run's final parameters equal
# an uninterrupted run's, bit for bit. (A network partition needs emulated nodes: mpirun-nodes.sh.)
# SOAK_SEED replays a sequence (printed at the start); SOAK_ROUNDS: how many starts get a fault (make check:
# 8; `make soak`: 40, a fresh seed).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
seed=${SOAK_SEED:-1}
rounds=${SOAK_ROUNDS:-8}
echo "fault soak: SOAK_SEED=$seed SOAK_ROUNDS=$rounds"
small_mnist "$TMP/data" 3000 200 # 2 ranks x 16: 94 steps per epoch, 282 in all
common="--data $TMP/data --batch-size 16 --epochs 3 --log-interval 10 --seed 11 --threads 1"
ckpt="--checkpoint-dir $TMP/ckpt --checkpoint-every 7 --step-timeout 3 --comm-timeout 6"
BOUND=30 # seconds a start may take: start-up, the deadline 6 s, the 5 s window, the watchdogs, margin
mkdir "$TMP/pids"

run_np 2 "$MNIST_DDP" $common --save-model "$TMP/whole.h5" >"$TMP/whole.log" 2>&1 ||
  { cat "$TMP/whole.log"; fail "the uninterrupted run failed"; }

# The faults: one line per round, "KIND RANK DELAY_MS", from the seed alone.
awk -v seed="$seed" -v n="$rounds" 'BEGIN {
  srand(seed); split("usr1 stop kill-rank kill-launcher term-launcher", k, " ")
  for (i = 0; i < n; i++) printf "%s %d %d\n", k[1 + int(rand() * 5)], int(rand() * 2), 200 + int(rand() * 3000)
}' >"$TMP/faults"

# ranks_gone LIMIT: every rank of the last start has ended within LIMIT s (a zombie has ended).
ranks_gone() {
  t=$(now)
  for p in "$TMP"/pids/*; do
    [ -s "$p" ] || continue
    while :; do
      running "$(cat "$p")" || break
      [ "$(ms_since "$t")" -le $(($1 * 1000)) ] || { kill -9 "$(cat "$p")"; fail "round $round: rank pid $(cat "$p") outlived its job"; }
      [ "${running_st#T}" = "$running_st" ] || kill -9 "$(cat "$p")" 2>/dev/null # stopped, its launcher gone: ours to end
      sleep 0.05
    done
  done
}

# start: the same command as every restart; $job is mpirun's pid, each rank's pid in $TMP/pids. Not our stdin:
# mpirun forwards it to rank 0, and it holds the list of faults.
start() {
  rm -f "$TMP"/pids/*
  # shellcheck disable=SC2016,SC2086
  "${MPIEXEC:-mpirun}" --oversubscribe -np 2 sh -c 'echo $$ >"$0/$OMPI_COMM_WORLD_RANK"; exec "$@"' "$TMP/pids" \
    "$MNIST_DDP" $common $ckpt --save-model "$TMP/resumed.h5" </dev/null >"$TMP/round$round.log" 2>&1 &
  job=$!
}

# finished: the run ended; its parameters are the uninterrupted run's, and the next run starts afresh.
finished() {
  same_model "$TMP/whole.h5" "$TMP/resumed.h5" ||
    fail "run $runs: its parameters differ from the uninterrupted run's (replay: SOAK_SEED=$seed)"
  echo "run $runs finished: its parameters equal the uninterrupted run's"
  runs=$((runs + 1))
  rm -rf "$TMP/ckpt" "$TMP/resumed.h5"
}

round=0 runs=1
while read -r kind rank delay; do
  round=$((round + 1))
  t0=$(now)
  start
  while kill -0 "$job" 2>/dev/null && [ "$(ms_since "$t0")" -lt "$delay" ]; do sleep 0.02; done
  hit=$kind
  if ! kill -0 "$job" 2>/dev/null; then
    hit="none (ended first)"
  elif [ "${kind%-launcher}" = "$kind" ] && [ ! -s "$TMP/pids/$rank" ]; then
    hit="none (rank $rank not started)"
  else
    case $kind in
    usr1) kill -USR1 "$(cat "$TMP/pids/$rank")" ;;
    stop) kill -STOP "$(cat "$TMP/pids/$rank")" ;;
    kill-rank) kill -9 "$(cat "$TMP/pids/$rank")" ;;
    kill-launcher) kill -9 "$job" ;;
    term-launcher) kill -TERM "$job" ;;
    esac
  fi
  while kill -0 "$job" 2>/dev/null && [ "$(ms_since "$t0")" -lt $((BOUND * 1000)) ]; do sleep 0.05; done
  if kill -0 "$job" 2>/dev/null; then
    kill -9 "$job"
    cat "$TMP/round$round.log"
    fail "round $round ($kind rank $rank at $delay ms): the job still ran after $BOUND s: a hang (replay: SOAK_SEED=$seed)"
  fi
  set +e
  wait "$job"
  rc=$?
  set -e
  ranks_gone 5
  ! grep -q -i 'corrupt\|checksum mismatch\|damaged' "$TMP/round$round.log" ||
    { cat "$TMP/round$round.log"; fail "round $round: a checkpoint was found damaged (replay: SOAK_SEED=$seed)"; }
  step=$(sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' "$TMP/round$round.log")
  echo "round $round, run $runs: $hit (rank $rank at $delay ms): exit $rc after $(ms_since "$t0") ms, from step ${step:-0}"
  [ "$rc" -ne 0 ] || finished
done <"$TMP/faults"

if [ -e "$TMP/ckpt" ]; then
  round=$((round + 1))
  start
  wait "$job" || { cat "$TMP/round$round.log"; fail "the last start, without a fault, failed"; }
  finished
fi
echo "ok: $round starts, $rounds faults drawn, $((runs - 1)) runs ended bit for bit as the uninterrupted one"
