#!/bin/sh
# The job's time limit (src/comm/preempt.c, train.c time_up): with checkpoints, a run whose job ends soon stops by
# itself at a step boundary with a checkpoint and exit 75, keeping 30 s plus a few steps and a checkpoint write
# free before the end; the same command with a far end resumes from that checkpoint and completes. The end
# comes from MNIST_DDP_JOB_END (for tests; Slurm's own sources are SLURM_JOB_END_TIME and scontrol).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 2 ranks x 16 of 2,000 samples: 63 steps per epoch, 100 epochs: far longer than the 45 s the job has (20 took
# 14 s on 2 cores).
small_mnist "$TMP/data" 2000 50
opts="--data $TMP/data --batch-size 16 --epochs 100 --log-interval 1000 --checkpoint-dir $TMP/ckpt"
t0=$(date +%s)
end=$((t0 + 45))
set +e
# shellcheck disable=SC2086
MNIST_DDP_JOB_END=$end run_np 2 "$MNIST_DDP" $opts >"$TMP/limit.log" 2>&1
rc=$?
set -e
t1=$(date +%s)
cat "$TMP/limit.log"
[ "$rc" -eq 75 ] || fail "a job ending in 45 s: exit $rc, expected 75"
grep -q "^the job ends in 4[0-5] s" "$TMP/limit.log" || fail "no line giving the job's end"
grep -q "^stopped before the job's time limit at step [0-9]* ([0-9]* s left): checkpoint written" "$TMP/limit.log" ||
  fail "no line saying why it stopped"
# Stopped with the margin kept: at least the 30 s safety left when it decided, and the whole job (mpirun's
# teardown too, slow on a loaded machine) well inside the limit; not long before it was needed either.
left=$(sed -n "s/^stopped before the job's time limit at step [0-9]* (\([0-9]*\) s left).*/\1/p" "$TMP/limit.log")
# (The decision comes at the first step boundary inside the margin, so "left" is just under 30 s plus three
# steps; a step slowed by load can eat some of that, hence 25. Without the safety it would be about 1 s.)
[ "$left" -ge 25 ] || fail "stopped with $left s left, far less than the 30 s margin"
[ $((end - t1)) -ge 15 ] || fail "mpirun ended $((end - t1)) s before the job's end: too close to the limit"
[ $((t1 - t0)) -ge 5 ] || fail "stopped after $((t1 - t0)) s: too early for a job that had 45 s"
ls "$TMP"/ckpt/ckpt-*.h5 >/dev/null 2>&1 || fail "no checkpoint in $TMP/ckpt"
step=$(sed -n "s/^stopped before the job's time limit at step \([0-9]*\) .*/\1/p" "$TMP/limit.log")
# The same command, with time to spare, resumes there (only a few epochs: --epochs is part of no identity).
set +e
# shellcheck disable=SC2086
MNIST_DDP_JOB_END=$((t1 + 3600)) run_np 2 "$MNIST_DDP" $opts --max-steps $((step + 5)) >"$TMP/resume.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$TMP/resume.log"; fail "resume: exit $rc"; }
grep -q "^resumed from step $step " "$TMP/resume.log" || { cat "$TMP/resume.log"; fail "resume: not from step $step"; }
echo "ok: stopped at step $step after $((t1 - t0)) s, $((end - t1)) s before the end; resumed"

# Where the end comes from scontrol (Slurm 22.05), each job reads its own line: a stand-in scontrol lists the
# three tasks of array job 700001, as the real one does when asked for the array's ID, the task whose ID is
# the array's (task 2, started last) first and two tasks that ended before it after it. Task 2 asks for
# 700001_2 and takes its own end, not the last line's; a plain job whose own end is already past ignores it
# with a warning instead of stopping at once (and being requeued to stop again).
mkdir -p "$TMP/bin"
cat >"$TMP/bin/scontrol" <<EOF
#!/bin/sh
echo "\$*" >>"$TMP/scontrol.args"
at() { date -d "@\$((\$(date +%s) + \$1))" +%Y-%m-%dT%H:%M:%S; }
echo "JobId=700001 ArrayJobId=700001 ArrayTaskId=2 JobName=sweep JobState=RUNNING StartTime=\$(at -5) EndTime=\$(at 600) Deadline=N/A"
echo "JobId=700002 ArrayJobId=700001 ArrayTaskId=0 JobName=sweep JobState=COMPLETED StartTime=\$(at -700) EndTime=\$(at -100) Deadline=N/A"
echo "JobId=700003 ArrayJobId=700001 ArrayTaskId=1 JobName=sweep JobState=COMPLETED StartTime=\$(at -100) EndTime=\$(at -3) Deadline=N/A"
EOF
chmod +x "$TMP/bin/scontrol"
# A singleton (no mpirun, which would take SLURM_JOB_ID for an allocation of its own).
jobend() {
  rm -f "$TMP/scontrol.args"
  set +e
  # shellcheck disable=SC2086
  env -u MNIST_DDP_JOB_END -u SLURM_JOB_END_TIME -u SLURM_ARRAY_JOB_ID -u SLURM_ARRAY_TASK_ID PATH="$TMP/bin:$PATH" \
    "$@" timeout -k 10 300 "$MNIST_DDP" $opts --max-steps 3 --checkpoint-dir "$TMP/ckpt-$SLURM_JOB_ID" \
    >"$TMP/jobend.log" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || { cat "$TMP/jobend.log"; fail "SLURM_JOB_ID=$SLURM_JOB_ID: exit $rc"; }
}
SLURM_JOB_ID=700001 jobend SLURM_ARRAY_JOB_ID=700001 SLURM_ARRAY_TASK_ID=2
[ "$(cat "$TMP/scontrol.args")" = "show job -o 700001_2" ] || fail "array task 2 asked scontrol '$(cat "$TMP/scontrol.args")'"
grep -Eq "^the job ends in (59[0-9]|600) s" "$TMP/jobend.log" || { cat "$TMP/jobend.log"; fail "array task 2 took another task's end"; }
echo "ok: array task 2 (job ID = the array's): $(grep -m1 '^the job ends in' "$TMP/jobend.log" | cut -d: -f1)"
SLURM_JOB_ID=700003 jobend
[ "$(cat "$TMP/scontrol.args")" = "show job -o 700003" ] || fail "job 700003 asked scontrol '$(cat "$TMP/scontrol.args")'"
grep -Eq "warning: the job's end time from scontrol show job is [0-9] s in the past: ignored" "$TMP/jobend.log" &&
  ! grep -q '^the job ends in' "$TMP/jobend.log" || { cat "$TMP/jobend.log"; fail "an end already past was not ignored"; }
echo "ok: an end already past: $(grep -m1 'warning: ' "$TMP/jobend.log")"
