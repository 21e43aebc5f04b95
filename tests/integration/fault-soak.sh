#!/bin/sh
# A seeded fault soak: a checkpointed run restarted with the same command until it finishes (then a new one),
# each start hit at a random moment by one fault: SIGUSR1 or SIGSTOP to a random rank, kill -9 of a rank or of
# mpirun, SIGTERM to mpirun (none where the start ends first). SOAK_NODES=2: one rank on each of two emulated
# nodes (tests/multinode/nodes.sh), with a network partition among the faults. Asserted: no start outlives its
# bound (no hang), no rank outlives its job, no checkpoint is ever found damaged, and each run's final
# parameters equal an uninterrupted run's, bit for bit.
# SOAK_SEED replays a sequence (printed at the start); SOAK_ROUNDS: how many starts get a fault (make check:
# 8; `make soak`: 40, a fresh seed). The first rounds draw each kind once, so any SOAK_ROUNDS at least the
# number of kinds covers them all.
. "${abs_top_srcdir:-.}/tests/lib.sh"
nodes=${SOAK_NODES:-1}
[ "$nodes" = 1 ] || . "$abs_top_srcdir/tests/multinode/nodes.sh"
set -e
need_data
seed=${SOAK_SEED:-1}
rounds=${SOAK_ROUNDS:-8}
echo "fault soak: SOAK_SEED=$seed SOAK_ROUNDS=$rounds"
small_mnist "$TMP/data" 3000 200 # 2 ranks x 16: 94 steps per epoch, 282 in all
common="--data $TMP/data --batch-size 16 --epochs 3 --log-interval 10 --seed 11 --threads 1"
ckpt="--checkpoint-dir $TMP/ckpt --checkpoint-every 7 --step-timeout 3 --comm-timeout 6"
BOUND=30 # seconds a start may take: start-up, the deadline 6 s, the 5 s window, the watchdogs, margin
kinds="usr1 stop kill-rank kill-launcher term-launcher"
GONE=5 # seconds a rank may outlive mpirun
mkdir "$TMP/pids"
if [ "$nodes" != 1 ]; then
  nodes_up 2
  kinds="$kinds partition"
  # A partitioned rank ends at its own deadline (3 s + the 5 s window + the abort's grace), mpirun by keepalive.
  GONE=15
  # The README's advice: Open MPI's keepalive shorter than --step-timeout ends mpirun and its daemons.
  export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=2
fi

# launch ARGS...: becomes mpirun (exec: a subshell's pid is mpirun's) with 2 ranks of mnist_ddp, each noting
# its pid in $TMP/pids; with 2 nodes, mpirun on node1 (nsenter execs it too) starts node2's daemon through the
# remote-launch agent. $bounded: a command that mpirun runs under (a time limit), none for the faulted starts.
# shellcheck disable=SC2086 # $bounded: a command and its arguments
launch() {
  # shellcheck disable=SC2016
  set -- sh -c 'echo $$ >"$0/$OMPI_COMM_WORLD_RANK"; exec "$@"' "$TMP/pids" "$MNIST_DDP" "$@"
  if [ "$nodes" = 1 ]; then
    exec ${bounded:-} "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$@"
  else
    exec nsenter -t "$(node_pid node1)" --net --uts --mount --wd="$PWD" -- ${bounded:-} "${MPIEXEC:-mpirun}" --mca plm_rsh_agent "$abs_top_srcdir/tests/multinode/rsh-agent.sh" \
      --host node1:1,node2:1 -np 2 "$@"
  fi
}

# shellcheck disable=SC2086
(bounded="timeout -k 10 300" launch $common --save-model "$TMP/whole.h5") </dev/null >"$TMP/whole.log" 2>&1 ||
  { cat "$TMP/whole.log"; fail "the uninterrupted run failed"; }

# The faults: one line per round, "KIND RANK DELAY_MS", from the seed alone: the kinds once each in a random
# order, then drawn at random.
awk -v seed="$seed" -v n="$rounds" -v kinds="$kinds" 'BEGIN {
  srand(seed); m = split(kinds, k, " ")
  for (i = m; i > 1; i--) { j = 1 + int(rand() * i); t = k[i]; k[i] = k[j]; k[j] = t }
  for (i = 0; i < n; i++)
    printf "%s %d %d\n", k[i < m ? i + 1 : 1 + int(rand() * m)], int(rand() * 2), 200 + int(rand() * 3000)
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
  # shellcheck disable=SC2086
  launch $common $ckpt --save-model "$TMP/resumed.h5" </dev/null >"$TMP/round$round.log" 2>&1 &
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
  # A partition is timed from the ranks' start: one before node2's daemon has called mpirun back is Open
  # MPI's launch failure, which waits for TCP to give up (minutes), before any rank exists.
  if [ "$kind" = partition ]; then
    while kill -0 "$job" 2>/dev/null && { [ ! -s "$TMP/pids/0" ] || [ ! -s "$TMP/pids/1" ]; } &&
      [ "$(ms_since "$t0")" -lt $((BOUND * 1000)) ]; do sleep 0.02; done
    t0=$(now)
  fi
  while kill -0 "$job" 2>/dev/null && [ "$(ms_since "$t0")" -lt "$delay" ]; do sleep 0.02; done
  hit=$kind
  if ! kill -0 "$job" 2>/dev/null; then
    hit="none ($kind: ended first)"
  elif [ "${kind%-launcher}" = "$kind" ] && [ "$kind" != partition ] && [ ! -s "$TMP/pids/$rank" ]; then
    hit="none ($kind: rank $rank not started)"
  else
    case $kind in
    usr1) kill -USR1 "$(cat "$TMP/pids/$rank")" ;;
    stop) kill -STOP "$(cat "$TMP/pids/$rank")" ;;
    kill-rank) kill -9 "$(cat "$TMP/pids/$rank")" ;;
    kill-launcher) kill -9 "$job" ;;
    term-launcher) kill -TERM "$job" ;;
    partition) nsenter -t "$multinode_switch" --net ip link set p2 down ;;
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
  ranks_gone $GONE
  if [ "$nodes" != 1 ]; then
    # Open MPI's daemons end with their job too (a partitioned node's once keepalive names it lost); then a
    # fresh node2, its link up again.
    for _ in $(seq 50); do [ "$(node_left 'mnist_ddp|orted|mpirun')" -eq 0 ] && break; sleep 0.2; done
    [ "$(node_left 'mnist_ddp|orted|mpirun')" -eq 0 ] ||
      fail "round $round ($hit): $(node_left 'mnist_ddp|orted|mpirun') processes left on the nodes (replay: SOAK_SEED=$seed)"
    [ "$hit" != partition ] || { node_kill node2 && node_add 2; }
  fi
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
