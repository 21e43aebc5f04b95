#!/bin/sh
# A killed launcher (kill -9 of mpirun: an OOM kill, a dropped login session) leaves no rank behind
# (src/comm/lifeline.c). With --checkpoint-dir the ranks stop at the next step with a checkpoint, release the
# directory's lock, and the same command resumes at once and ends with the parameters of a run that was never
# stopped, bit for bit. Without, the ranks end within a second (Open MPI's own client ends them ~2.4 s later).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/data" 4000 50 # 2 ranks x 16: 125 steps
common="--data $TMP/data --batch-size 16 --epochs 1 --log-interval 1 --seed 3 --threads 1"
mkdir "$TMP/pids"

# launch NAME OPTIONS...: mpirun in the background (its pid in $job, not a wrapper's), each rank's pid in
# $TMP/pids; rank 0 sleeps 0.5 s before step 41 (MNIST_DDP_STRAGGLER), so the kill lands between two steps. The
# ranks write into a pipe whose reader ($reader) dies with mpirun, as a launcher's own pipes do (Open MPI gives
# stdout a terminal): step 41's line then meets a closed pipe.
launch() {
  name=$1; shift
  rm -f "$TMP"/pids/* "$TMP/out"
  mkfifo "$TMP/out"
  cat <"$TMP/out" >"$TMP/$name.log" &
  reader=$!
  # shellcheck disable=SC2016,SC2086
  MNIST_DDP_STRAGGLER=0:41:0.5 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 \
    sh -c 'echo $$ >"$0/$OMPI_COMM_WORLD_RANK"; exec "$@" >"$0/../out" 2>&1' "$TMP/pids" "$MNIST_DDP" $common "$@" \
    </dev/null >"$TMP/$name.launcher.log" 2>&1 &
  job=$!
  i=0
  until grep -q '^epoch 1 step 40/' "$TMP/$name.log" 2>/dev/null && [ -s "$TMP/pids/1" ]; do
    i=$((i + 1))
    [ "$i" -lt 3000 ] || { kill -9 "$job" "$reader"; cat "$TMP/$name.log"; fail "$name: no step 40 within a minute"; }
    sleep 0.02
  done
}

# ranks_end NAME LIMIT: mpirun and the pipe's reader killed now; every rank's process is gone within LIMIT s.
ranks_end() {
  kill -9 "$job" "$reader"
  t0=$(now)
  while :; do
    alive=
    for p in "$TMP"/pids/*; do
      ! running "$(cat "$p")" || alive="$alive $(cat "$p")"
    done
    [ -n "$alive" ] || break
    if [ "$(ms_since "$t0")" -gt $(($2 * 1000)) ]; then
      kill -9 $alive
      fail "$1: ranks$alive still ran $2 s after their launcher was killed"
    fi
    sleep 0.05
  done
  wait "$job" "$reader" 2>/dev/null || true
  echo "ok: $1: the ranks ended $(ms_since "$t0") ms after mpirun was killed"
}

launch plain
ranks_end "no --checkpoint-dir" 1

run_np 2 "$MNIST_DDP" $common --save-model "$TMP/whole.h5" >"$TMP/whole.log" 2>&1 || { cat "$TMP/whole.log"; fail "the uninterrupted run failed"; }
launch stopped --checkpoint-dir "$TMP/ckpt" --checkpoint-every 100000
ranks_end "--checkpoint-dir" 5
ls "$TMP/ckpt"/ckpt-*.h5 >/dev/null 2>&1 || fail "no checkpoint after the launcher's death"
set +e
run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/ckpt" --checkpoint-every 100000 --save-model "$TMP/resumed.h5" \
  >"$TMP/resumed.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$TMP/resumed.log"; fail "the restart exited $rc (the lock still held?)"; }
from=$(sed -n 's/^resumed from step \([0-9]*\) .*/\1/p' "$TMP/resumed.log")
[ -n "$from" ] && [ "$from" -ge 40 ] && [ "$from" -lt 125 ] ||
  { cat "$TMP/resumed.log"; fail "the restart did not resume from a step the stop wrote (step '$from')"; }
same_model "$TMP/whole.h5" "$TMP/resumed.h5" || fail "the resumed run's parameters differ from the uninterrupted run's"
echo "ok: resumed from step $from, the checkpoint the stop wrote; the parameters equal the uninterrupted run's"
