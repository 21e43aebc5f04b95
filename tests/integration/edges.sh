#!/bin/sh
# Edges that a plausible wrong implementation gets past the other tests with:
# - nothing left behind, after a run that succeeds as after one stopped by SIGUSR1 (exit 75): no shared-memory
#   segment of the run's own in /dev/shm (src/comm/grad_shm.c), no temporary beside the checkpoints, the model
#   or the metrics (src/base/atomic_file.c), the checkpoint directory's lock file emptied and free at once for
#   the next run (src/base/run_lock.c), no process of the run;
# - two signals in a row, landed between the same two step boundaries (rank 1 sleeps before step 3,
#   MNIST_DDP_STRAGGLER, and is seen asleep before the first signal and after the last): the run stops once,
#   exit 75, named after the first signal, whether both reach one rank or one reaches each (src/comm/preempt.c);
# - two sources of one setting, each way round: --threads over SLURM_CPUS_PER_TASK (src/comm/bootstrap.c), and
#   the job's end from MNIST_DDP_JOB_END over SLURM_JOB_END_TIME over scontrol (preempt.c find_job_end), with
#   ends far apart so that the printed seconds tell which one was read; an end 1 s past is ignored with its
#   warning, one 1 h ahead is used;
# - job IDs that are prefixes of each other: scontrol's line of job 12, not 120's or 1200's; array task 12_1
#   (job 13), not 12_10 (job 130), whichever order scontrol lists them in.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 400 samples, 2 ranks x 16: 13 steps per epoch.
small_mnist "$TMP/data" 400 100
host=$(hostname)
job='' run_env=''
trap 'kill "$job" 2>/dev/null || true; rm -rf "$TMP"' EXIT
# shellcheck disable=SC2016
record='echo "$OMPI_COMM_WORLD_RANK $$" >>"$0"; exec "$@"' # each rank's PID (exec keeps it) in the file $0
common="--data $TMP/data --batch-size 16 --log-interval 1 --threads 1 --seed 3"

# ---- Nothing left behind ----------------------------------------------------------------------------------

shm_list() { (cd /dev/shm && for f in mnist_ddp.*; do [ -e "$f" ] && echo "$f"; done) | sort; }

# start NAME OPTIONS...: a 2-rank run in the background, with the variables in $run_env, checkpoints in
# $TMP/NAME.ckpt, the model and the metrics in $TMP/NAME.out; output in $TMP/NAME.log, the ranks' PIDs in
# $TMP/NAME.pids, the job's in $job.
start() {
  name=$1; shift
  mkdir "$TMP/$name.out"
  shm_list >"$TMP/$name.shm-before"
  # shellcheck disable=SC2086
  env ${run_env:-} timeout -k 10 120 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 sh -c "$record" "$TMP/$name.pids" \
    "$MNIST_DDP" $common --checkpoint-dir "$TMP/$name.ckpt" --checkpoint-every 100000 --save-model "$TMP/$name.out/model.h5" \
    --metrics "$TMP/$name.out/metrics.json" "$@" >"$TMP/$name.log" 2>&1 &
  job=$!
}
finish() { # the job's exit status in $rc
  set +e
  wait "$job"
  rc=$?
  set -e
  job=
}
pid_of() { awk -v r="$2" '$1 == r { print $2 }' "$TMP/$1.pids"; }

# left_behind NAME OUTPUTS CKPTS: after the run NAME ended, its output directory holds exactly OUTPUTS, its
# checkpoint directory CKPTS and the lock file, emptied; no segment named after its rank 0 is in /dev/shm
# (mnist_ddp.TAG.RANK, TAG = rank 0's PID x 1000 + ms: other tests' runs may come and go meanwhile); none of
# its processes is alive (a zombie that init has yet to reap has ended).
left_behind() {
  name=$1
  got=$(cd "$TMP/$name.out" && ls -A | tr '\n' ' ')
  [ "$got" = "$2 " ] || fail "$name: the model's and metrics' directory holds '$got', expected '$2 '"
  got=$(cd "$TMP/$name.ckpt" && ls -A | tr '\n' ' ')
  [ "$got" = "$3 mnist_ddp.lock " ] || fail "$name: the checkpoint directory holds '$got', expected '$3 mnist_ddp.lock '"
  [ ! -s "$TMP/$name.ckpt/mnist_ddp.lock" ] || fail "$name: the lock file still names '$(cat "$TMP/$name.ckpt/mnist_ddp.lock")'"
  [ "$(wc -l <"$TMP/$name.pids")" -eq 2 ] || fail "$name: not 2 ranks in $TMP/$name.pids"
  pid0=$(pid_of "$name" 0)
  shm_list | comm -13 "$TMP/$name.shm-before" - >"$TMP/$name.shm-new"
  while read -r seg; do
    tag=${seg#mnist_ddp.}
    tag=${tag%.*}
    case $tag in *[!0-9]* | '') continue ;; esac
    [ $((tag / 1000)) -ne "$pid0" ] || fail "$name: /dev/shm/$seg left behind (rank 0 was pid $pid0)"
    echo "note: /dev/shm/$seg appeared meanwhile (another run's: rank 0 here was pid $pid0)"
  done <"$TMP/$name.shm-new"
  for pid in $(awk '{ print $2 }' "$TMP/$name.pids"); do
    ! running "$pid" || fail "$name: rank process $pid is still alive: $(ps -o pid=,stat=,args= -p "$pid")"
  done
  left=$(pgrep -f -- "$TMP/$name" || true)
  [ -z "$left" ] || fail "$name: processes left: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")"
}

# free_at_once NAME: the next run on NAME's checkpoint directory starts and ends (0, not 73), without a warning
# about a holder that did not release it.
free_at_once() {
  set +e
  # shellcheck disable=SC2086
  timeout -k 10 120 "$MNIST_DDP" $common --checkpoint-dir "$TMP/$1.ckpt" --resume never --epochs 1 --max-steps 1 \
    >"$TMP/$1.next.log" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || { cat "$TMP/$1.next.log"; fail "$1: the next run on its checkpoint directory exited $rc"; }
  ! grep -q 'taking over from a run' "$TMP/$1.next.log" || { cat "$TMP/$1.next.log"; fail "$1: the lock was not released"; }
}

start clean --epochs 1 --max-steps 4
finish
[ "$rc" -eq 0 ] || { cat "$TMP/clean.log"; fail "clean: exit $rc"; }
grep -q '^all-reduce: .* (fp32 in shared memory), ' "$TMP/clean.log" ||
  { cat "$TMP/clean.log"; fail "clean: the gradients were not summed in shared memory (nothing to leave behind)"; }
left_behind clean "metrics.json model.h5" "ckpt-000000000004.h5"
free_at_once clean
echo "ok: a run that succeeds leaves its files only, the lock free, nothing in /dev/shm, no process"

# ---- Signals between two step boundaries ------------------------------------------------------------------

# asleep NAME: rank 1 is in its straggler sleep before step 3 (4 s), with at least 0.5 s of it left: its status
# line (SIGUSR2; stall.c) says step 2 (done), phase training, for less than 3.5 s. Waits at most 10 s for it.
asleep() {
  p1=$(pid_of "$1" 1)
  i=0
  while [ "$i" -lt 100 ]; do
    n=$(grep -c "^mnist_ddp: status: rank 1/2 " "$TMP/$1.log" || true)
    kill -USR2 "$p1" 2>/dev/null || return 1
    j=0
    while [ "$(grep -c "^mnist_ddp: status: rank 1/2 " "$TMP/$1.log" || true)" -le "$n" ] && [ "$j" -lt 100 ]; do
      j=$((j + 1)); sleep 0.01
    done
    last=$(grep "^mnist_ddp: status: rank 1/2 " "$TMP/$1.log" | tail -n 1)
    since=$(echo "$last" | sed -n "s|^mnist_ddp: status: rank 1/2 on $host (pid $p1): step 2, training for \([0-9]*\.[0-9]*\) s$|\1|p")
    if [ -n "$since" ]; then
      awk -v s="$since" 'BEGIN { exit !(s < 3.5) }' && return 0
      return 1
    fi
    i=$((i + 1)); sleep 0.1
  done
  return 1
}

# delivered PID SIG: waits until SIG (a name) sent to PID is no longer pending (its handler ran).
delivered() {
  case $2 in USR1) bit=9 ;; TERM) bit=14 ;; *) fail "delivered: no bit for $2" ;; esac
  i=0
  while :; do
    mask=$(awk '/^ShdPnd:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 0
    [ -n "$mask" ] && [ $((0x$mask >> bit & 1)) -eq 1 ] || return 0
    i=$((i + 1)); [ "$i" -lt 500 ] || fail "$2 to pid $1 still pending after 5 s"
    sleep 0.01
  done
}

# stopped NAME SIG@RANK...: a run whose rank 1 sleeps 4 s before step 3; once it is seen asleep, each signal is
# sent to its rank, the next only once the last was delivered; rank 1 is then seen still asleep, so all of them
# reached the run between the boundaries of steps 2 and 3. Exit status in $rc.
stopped() {
  name=$1; shift
  run_env=MNIST_DDP_STRAGGLER=1:3:4
  start "$name" --epochs 1
  run_env=
  i=0
  until grep -q '^epoch 1 step 2/' "$TMP/$name.log"; do
    i=$((i + 1)); [ "$i" -lt 3000 ] || { cat "$TMP/$name.log"; fail "$name: no step 2 within a minute"; }
    sleep 0.02
  done
  asleep "$name" || { cat "$TMP/$name.log"; fail "$name: rank 1 not seen in its sleep before step 3"; }
  for s in "$@"; do
    pid=$(pid_of "$name" "${s#*@}")
    kill -s "${s%@*}" "$pid" || { cat "$TMP/$name.log"; fail "$name: cannot send $s (pid $pid)"; }
    delivered "$pid" "${s%@*}"
  done
  asleep "$name" ||
    { cat "$TMP/$name.log"; fail "$name: the signals took longer than rank 1's sleep (a loaded machine?)"; }
  finish
}

# stop_line NAME SIG: exit 75, one stop, at step 3, named SIG; the stop's checkpoint only.
stop_line() {
  [ "$rc" -eq 75 ] || { cat "$TMP/$1.log"; fail "$1: exit $rc, expected 75"; }
  [ "$(grep -c '^stopped ' "$TMP/$1.log")" -eq 1 ] || { cat "$TMP/$1.log"; fail "$1: not one stop line"; }
  line="^stopped by $2 at step 3: checkpoint written, exit 75 \(run the same command to resume\); [0-9]+\.[0-9]{2} s"
  grep -Eq "$line from the signal to the exit$" "$TMP/$1.log" ||
    { cat "$TMP/$1.log"; fail "$1: the stop line is not 'stopped by $2 at step 3: ...'"; }
}

stopped usr1 USR1@1
stop_line usr1 SIGUSR1
left_behind usr1 "metrics.json" "ckpt-000000000003.h5"
free_at_once usr1
echo "ok: a run stopped by SIGUSR1 (exit 75) leaves its files only, the lock free, nothing in /dev/shm, no process"

stopped twice USR1@1 TERM@1
stop_line twice SIGUSR1
left_behind twice "metrics.json" "ckpt-000000000003.h5"
echo "ok: SIGUSR1 then SIGTERM to rank 1 in one step: $(grep '^stopped by' "$TMP/twice.log")"

stopped each USR1@0 TERM@1
stop_line each SIGUSR1
left_behind each "metrics.json" "ckpt-000000000003.h5"
echo "ok: SIGUSR1 to rank 0, then SIGTERM to rank 1, in one step: stopped by SIGUSR1"

stopped each-rev TERM@0 USR1@1
stop_line each-rev SIGTERM
left_behind each-rev "metrics.json" "ckpt-000000000003.h5"
echo "ok: SIGTERM to rank 0, then SIGUSR1 to rank 1, in one step: stopped by SIGTERM"

# ---- Two sources of one setting ---------------------------------------------------------------------------

# alone NAME VAR=VALUE... -- OPTIONS...: a singleton evaluation run with only these Slurm/end variables set,
# scontrol the stand-in below; output in $TMP/NAME.log.
mkdir "$TMP/bin"
alone() {
  name=$1; shift
  vars=
  while [ "$1" != -- ]; do vars="$vars $1"; shift; done
  shift
  rm -f "$TMP/scontrol.args"
  set +e
  # shellcheck disable=SC2086
  env -u MNIST_DDP_JOB_END -u SLURM_JOB_END_TIME -u SLURM_JOB_ID -u SLURM_ARRAY_JOB_ID -u SLURM_ARRAY_TASK_ID \
    -u SLURM_CPUS_PER_TASK PATH="$TMP/bin:$PATH" $vars timeout -k 10 120 "$MNIST_DDP" --data "$TMP/data" --epochs 0 \
    "$@" >"$TMP/$name.log" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || { cat "$TMP/$name.log"; fail "$name: exit $rc"; }
}

# threads NAME N: the start-up table has one rank, its threads column N.
threads() {
  grep -Eq '^  rank  host +local  device +threads$' "$TMP/$1.log" || { cat "$TMP/$1.log"; fail "$1: no start-up table"; }
  rows=$(grep -E '^ +[0-9]+  .* [0-9]+$' "$TMP/$1.log")
  [ "$(echo "$rows" | wc -l)" -eq 1 ] || { cat "$TMP/$1.log"; fail "$1: not one row in the start-up table"; }
  [ "$(echo "$rows" | awk '{ print $1 "/" $NF }')" = "0/$2" ] || { cat "$TMP/$1.log"; fail "$1: threads '$rows', expected $2"; }
}
alone thr-both1 SLURM_CPUS_PER_TASK=3 -- --threads 2
threads thr-both1 2
alone thr-both2 SLURM_CPUS_PER_TASK=2 -- --threads 3
threads thr-both2 3
alone thr-slurm SLURM_CPUS_PER_TASK=3 --
threads thr-slurm 3
echo "ok: --threads wins over SLURM_CPUS_PER_TASK, below it and above it; SLURM_CPUS_PER_TASK alone is used"

# ends NAME SECONDS: the run said the job ends in SECONDS (up to 5 s fewer: time passes before it reads the end).
ends() {
  line='s/^the job ends in \(-\{0,1\}[0-9]*\) s: stopping with a checkpoint [0-9]* s plus a few steps and a checkpoint'
  got=$(sed -n "$line write before that\$/\\1/p" "$TMP/$1.log")
  [ "$(echo "$got" | grep -c .)" -eq 1 ] || { cat "$TMP/$1.log"; fail "$1: not one line 'the job ends in N s: ...'"; }
  { [ "$got" -le "$2" ] && [ "$got" -ge $(($2 - 5)) ]; } ||
    { cat "$TMP/$1.log"; fail "$1: the job ends in $got s, expected $2"; }
}
ck="--checkpoint-dir $TMP/ends --resume never"
# A stand-in for Slurm 22.05's scontrol: its EndTimes are ADD s from when it is asked (local time, as Slurm
# prints them); the lines for ID are those of job 12, 120 and 1200 (array 12: its tasks 1, 10, 0 and 100).
cat >"$TMP/bin/scontrol" <<EOF
#!/bin/sh
echo "\$*" >>"$TMP/scontrol.args"
at() { date -d "@\$((\$(date +%s) + \$1))" +%Y-%m-%dT%H:%M:%S; }
case \$4 in
12)
  echo "JobId=120 JobName=a UserId=u(1) JobState=RUNNING RunTime=00:00:05 StartTime=\$(at -5) EndTime=\$(at 2000) Deadline=N/A"
  echo "JobId=12 JobName=a UserId=u(1) JobState=RUNNING RunTime=00:00:05 StartTime=\$(at -5) EndTime=\$(at 1000) Deadline=N/A"
  echo "JobId=1200 JobName=a UserId=u(1) JobState=RUNNING RunTime=00:00:05 StartTime=\$(at -5) EndTime=\$(at 3000) Deadline=N/A" ;;
12_1)
  echo "JobId=130 ArrayJobId=12 ArrayTaskId=10 JobName=a JobState=RUNNING StartTime=\$(at -5) EndTime=\$(at 2500) Deadline=N/A"
  echo "JobId=13 ArrayJobId=12 ArrayTaskId=1 JobName=a JobState=RUNNING StartTime=\$(at -5) EndTime=\$(at 1500) Deadline=N/A"
  echo "JobId=12 ArrayJobId=12 ArrayTaskId=0 JobName=a JobState=RUNNING StartTime=\$(at -5) EndTime=\$(at 3500) Deadline=N/A"
  echo "JobId=1300 ArrayJobId=12 ArrayTaskId=100 JobName=a JobState=RUNNING StartTime=\$(at -5) EndTime=\$(at 4500) Deadline=N/A" ;;
*) exit 1 ;;
esac
EOF
chmod +x "$TMP/bin/scontrol"

now=$(date +%s)
alone end-both1 MNIST_DDP_JOB_END=$((now + 3600)) SLURM_JOB_END_TIME=$((now + 7200)) -- $ck
ends end-both1 3600
now=$(date +%s)
alone end-both2 MNIST_DDP_JOB_END=$((now + 7200)) SLURM_JOB_END_TIME=$((now + 3600)) -- $ck
ends end-both2 7200
now=$(date +%s)
alone end-slurm SLURM_JOB_END_TIME=$((now + 5400)) SLURM_JOB_ID=12 -- $ck
ends end-slurm 5400
[ ! -e "$TMP/scontrol.args" ] || fail "end-slurm: scontrol was asked ($(cat "$TMP/scontrol.args")) with SLURM_JOB_END_TIME set"
echo "ok: MNIST_DDP_JOB_END wins over SLURM_JOB_END_TIME, later or sooner; SLURM_JOB_END_TIME over scontrol"

# Boundaries: an end 1 s past (by the time it is read, 1 to 3 s) is ignored with its warning; one 1 h ahead
# is used (end-both1).
now=$(date +%s)
alone end-past MNIST_DDP_JOB_END=$((now - 1)) -- $ck
line="^mnist_ddp: warning: the job's end time from MNIST_DDP_JOB_END is [1-3] s in the past: ignored, no stop"
grep -Eq "$line before the time limit \[rank 0/1 on [^]]*\]$" "$TMP/end-past.log" ||
  { cat "$TMP/end-past.log"; fail "end-past: no warning ignoring an end 1 s past"; }
! grep -q '^the job ends in' "$TMP/end-past.log" || { cat "$TMP/end-past.log"; fail "end-past: an end 1 s past was used"; }
echo "ok: an end 1 s past is ignored with its warning, one 1 h ahead is used"

# ---- Job IDs that are prefixes of each other --------------------------------------------------------------

alone scontrol-12 SLURM_JOB_ID=12 -- $ck
[ "$(cat "$TMP/scontrol.args")" = "show job -o 12" ] || fail "scontrol-12: asked scontrol '$(cat "$TMP/scontrol.args")'"
ends scontrol-12 1000
echo "ok: job 12 reads its own EndTime, not job 120's (listed before) or 1200's (after)"
alone scontrol-12_1 SLURM_JOB_ID=13 SLURM_ARRAY_JOB_ID=12 SLURM_ARRAY_TASK_ID=1 -- $ck
[ "$(cat "$TMP/scontrol.args")" = "show job -o 12_1" ] || fail "scontrol-12_1: asked scontrol '$(cat "$TMP/scontrol.args")'"
ends scontrol-12_1 1500
echo "ok: array task 12_1 (job 13) reads its own EndTime, not 12_10's (job 130, before) or 12_0's or 12_100's (after)"
