#!/bin/sh
# The job's time limit (src/preempt.c, train.c time_up): with checkpoints, a run whose job ends soon stops by
# itself at a step boundary with a checkpoint and exit 75, keeping 30 s plus a few steps and a checkpoint write
# free before the end; the same command with a far end resumes from that checkpoint and completes. The end
# comes from MNIST_DDP_JOB_END (for tests; Slurm's own sources are SLURM_JOB_END_TIME and scontrol).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 2 ranks x 16 of 2,000 samples: 63 steps per epoch, 20 epochs: far longer than the 45 s the job has.
small_mnist "$TMP/data" 2000 50
opts="--data $TMP/data --batch-size 16 --epochs 20 --log-interval 1000 --checkpoint-dir $TMP/ckpt"
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
