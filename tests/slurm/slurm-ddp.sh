#!/bin/bash
# mnist_ddp on a real Slurm: a private one-node cluster on 127.0.0.1 (its own munged, slurmctld and
# slurmd, config, ports, state and spool in a temp dir, a fake 2-GPU gres) runs
#   srun --mpi=pmix, slurm/run-ddp.sbatch (CPU and "GPU"), slurm/run-array.sbatch, slurm/scaling,
#   and srun --mpi=none, which must fail fast with the PMI message.
# Run by make check, or by hand from a built tree:
#   abs_top_builddir=$PWD abs_top_srcdir=$PWD tests/slurm/slurm-ddp.sh
# Needs root (slurmd); installs munge, Slurm and PMIx with apt-get when missing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
skip() { echo "SKIP: $*"; exit 77; }
hard() { echo "ERROR: $*"; exit 99; }
# shellcheck source-path=SCRIPTDIR source=cluster.sh
. "$srcdir/tests/slurm/cluster.sh"
slurm_template_test 1

# The templates' resource numbers, scaled down to this node and without GPUs.
cpu=(--nodes=1 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --mem=1G --time=15)
train=(--device cpu --max-steps 20)

# 1. srun --mpi=pmix wires two ranks into one world.
timeout -k 10 600 srun --mpi=pmix -n 2 -c 1 "$bin" --data "$data" "${train[@]}" --metrics srun.jsonl > srun.out 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -Eq '^summary: test accuracy .*, 2 ranks' srun.out && grep -q '"type":"summary".*"images_per_s"' srun.jsonl; then
    pass "srun --mpi=pmix -n 2: $(grep '^summary:' srun.out)"
else
    fail "srun --mpi=pmix -n 2 exited $rc without a 2-rank summary" srun.out
fi

# 2. run-ddp.sbatch, unchanged but for the resource numbers.
timeout -k 10 600 sbatch --wait "${cpu[@]}" "$srcdir/slurm/run-ddp.sbatch" "${train[@]}" > ddp.submit 2>&1
rc=$? job=$(job_id ddp.submit) log=mnist-ddp-$job.out
if [ "$rc" -eq 0 ] && grep -q 'test accuracy' "$log" && grep -q "MASTER_ADDR=$node MASTER_PORT=[0-9]" "$log"; then
    pass "sbatch run-ddp.sbatch: $(grep -m1 'MASTER_ADDR' "$log"); $(grep '^summary:' "$log")"
else
    fail "sbatch run-ddp.sbatch exited $rc" ddp.submit "$log"
fi

# 3. run-array.sbatch: three 2-rank tasks at once, each on its own port (pinned: --bootstrap-addr).
MNIST_DDP_PIN_PORT=1 timeout -k 10 900 sbatch --wait --array=0-2 "${cpu[@]}" "$srcdir/slurm/run-array.sbatch" \
    "${train[@]}" > array.submit 2>&1 &
sbatch_pid=$!
job='' most=0
while kill -0 "$sbatch_pid" 2> /dev/null; do
    [ -n "$job" ] || job=$(job_id array.submit)
    running=0
    [ -n "$job" ] && running=$(squeue -h -r -t R -j "$job" 2> /dev/null | wc -l)
    [ "$running" -gt "$most" ] && most=$running
    sleep 0.2
done
wait "$sbatch_pid"
rc=$? job=$(job_id array.submit)
logs=("mnist-sweep-${job}_0.out" "mnist-sweep-${job}_1.out" "mnist-sweep-${job}_2.out")
ports=$(grep -ho 'MASTER_PORT=[0-9]*' "${logs[@]}" 2> /dev/null | sort -u | wc -l)
done_tasks=0
for i in 0 1 2; do
    dir=runs/mnist-sweep-$job/task-$i
    grep -q 'test accuracy' "${logs[i]}" && grep -q -- "--bootstrap-addr $node:" "${logs[i]}" &&
        grep -q '"type":"summary"' "$dir/metrics.jsonl" && [ -s "$dir/model.h5" ] && [ -s "$dir/row.tsv" ] &&
        done_tasks=$((done_tasks + 1))
done
# The sweep's table (written by the last task to finish, printed in its log): one row per task with its
# sweep row and the accuracy and time of its metrics' summary.
sweep_table_ok() {
    "${PYTHON3:-/usr/bin/python3}" - "runs/mnist-sweep-$job" "$srcdir/slurm/sweep.tsv" << 'PY'
import json, sys
d, table = sys.argv[1], sys.argv[2]
rows = [l.rstrip("\n").split("\t") for l in open(table) if l.strip() and not l.startswith("#")]
got = [l.rstrip("\n").split("\t") for l in open(d + "/summary.tsv")]
want_head = ["task"] + rows[0] + ["test_accuracy_%", "epochs", "time_s", "images_per_s"]
if got[0] != want_head or len(got) != 4:
    sys.exit("summary.tsv: %r" % got)
for i, r in enumerate(got[1:]):
    s = [json.loads(l) for l in open("%s/task-%d/metrics.jsonl" % (d, i)) if '"summary"' in l][-1]
    if r[:3] != ["task-%d" % i] + rows[i + 1] or abs(float(r[3]) - 100 * s["test_accuracy"]) > 0.006 or \
            abs(float(r[5]) - s["wall_s"]) > 0.06:
        sys.exit("summary.tsv row %r, task %d's summary %r" % (r, i, s))
PY
}
table_logs=$(grep -l '^run-array: all 3 tasks done' "${logs[@]}" 2> /dev/null | wc -l)
if [ "$rc" -eq 0 ] && [ "$done_tasks" -eq 3 ] && [ "$ports" -eq 3 ] && [ "$most" -eq 3 ] &&
    grep -q -- '--seed 2 --lr 1.0' "${logs[1]}" && [ "$table_logs" -ge 1 ] && sweep_table_ok; then
    pass "sbatch --array=0-2 run-array.sbatch: 3 tasks at once, ports $(grep -ho 'MASTER_PORT=[0-9]*' "${logs[@]}" | cut -d= -f2 | tr '\n' ' ')"
    grep -h -A4 '^run-array: all 3 tasks done' "${logs[@]}"
else
    fail "array: sbatch exit $rc, $done_tasks/3 tasks complete, $ports distinct ports, at most $most running at once, the sweep's table in $table_logs log(s)" \
        array.submit "${logs[@]}" "runs/mnist-sweep-$job/summary.tsv"
fi

# 4. Without PMI every rank would be a world of 1: a one-line message and exit 78, not a hang.
timeout -k 5 120 srun --mpi=none -n 2 "$bin" --data "$data" "${train[@]}" > nopmi.out 2>&1
rc=$?
if [ "$rc" -eq 78 ] && grep -q 'srun --mpi=pmix' nopmi.out && grep -q 'mpirun' nopmi.out; then
    pass "srun --mpi=none: exit 78, $(grep -m1 'srun --mpi=pmix' nopmi.out)"
else
    fail "srun --mpi=none -n 2 exited $rc (want 78 and a message naming srun --mpi=pmix and mpirun)" nopmi.out
fi

# 5. With the gres: two "GPUs" are visible to the job, and --device auto falls back to the CPU.
timeout -k 10 600 sbatch --wait --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --mem=1G \
    --time=15 "$srcdir/slurm/run-ddp.sbatch" --device auto --max-steps 5 > gpu.submit 2>&1
rc=$? job=$(job_id gpu.submit) log=mnist-ddp-$job.out
if [ "$rc" -eq 0 ] && grep -q 'SLURM_GPUS_ON_NODE=2 CUDA_VISIBLE_DEVICES=0,1' "$log" &&
    grep -Eq '^ +0 +[^ ]+ +0 +cpu' "$log" && grep -q '^summary: test accuracy' "$log"; then
    pass "--gpus-per-node=2: $(grep -m1 'CUDA_VISIBLE_DEVICES' "$log"), rank 0 on the CPU"
else
    fail "--gpus-per-node=2 job exited $rc (want the GPUs in its log and a CPU run)" gpu.submit "$log"
fi

# 6. The template refuses a task count that does not match the GPUs, and a missing binary.
timeout -k 10 120 sbatch --wait --nodes=1 --ntasks-per-node=1 --gpus-per-node=2 --cpus-per-task=1 --mem=1G \
    --time=5 "$srcdir/slurm/run-ddp.sbatch" > mismatch.submit 2>&1
rc=$? job=$(job_id mismatch.submit) log=mnist-ddp-$job.out
if [ "$rc" -ne 0 ] && grep -q 'set --ntasks-per-node=2 (one rank per GPU)' "$log"; then
    pass "1 task for 2 GPUs refused: $(cat "$log")"
else
    fail "1 task for 2 GPUs: exit $rc" mismatch.submit "$log"
fi
MNIST_DDP=$tmp/no-such-binary timeout -k 10 120 sbatch --wait "${cpu[@]}" --time=5 \
    "$srcdir/slurm/run-ddp.sbatch" > nobin.submit 2>&1
rc=$? job=$(job_id nobin.submit) log=mnist-ddp-$job.out
if [ "$rc" -ne 0 ] && grep -q "no executable mnist_ddp at $tmp/no-such-binary" "$log"; then
    pass "missing binary refused: $(cat "$log")"
else
    fail "missing binary: exit $rc" nobin.submit "$log"
fi

# 7. slurm/scaling inside one allocation: 1 and 2 ranks, a table with speed-up and efficiency.
timeout -k 10 900 sbatch --wait --nodes=1 --ntasks=2 --cpus-per-task=1 --mem=1G --time=15 -o scaling-%j.out \
    --wrap "'$srcdir/slurm/scaling' --ranks 1,2 --max-steps 10 --out scaling -- --device cpu --data '$data'" \
    > scaling.submit 2>&1
rc=$? job=$(job_id scaling.submit)
if [ "$rc" -eq 0 ] && [ "$(awk 'NR > 1 && $2 > 0' scaling/scaling.tsv 2> /dev/null | cut -f1 | tr '\n' ' ')" = "1 2 " ] &&
    awk 'NR == 2 { exit !($3 == "1.000" && $4 == "1.000") }' scaling/scaling.tsv; then
    pass "slurm/scaling: $(tr '\t\n' ' ;' < scaling/scaling.tsv)"
else
    fail "slurm/scaling exited $rc" scaling.submit "scaling-$job.out" scaling/scaling.tsv
fi

# 8. Preemption: a job signalled mid-run checkpoints, exits 75, is requeued by the template (same job ID,
# PENDING again, then RUNNING), resumes and ends with the parameters of a job that was never signalled.
pre=(--max-steps 40 --log-interval 1 --seed 3)
# Bit for bit: every tensor of two --save-model files holds the same bytes.
same_model() {
    "${PYTHON3:-/usr/bin/python3}" - "$1" "$2" << 'PY'
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
sys.exit(0 if names and all(n in b and a[n][()].tobytes() == b[n][()].tobytes() for n in names) else 1)
PY
}
# note_state STATE: appends a job state to $states unless it repeats the last one or is transitional. The
# first PENDING is left out: a job may be running before the first look.
note_state() {
    ! slurm_transitional "$1" || return
    [ -n "$states" ] || [ "$1" != PENDING ] || return
    [ "$1" = "${states##* }" ] || states="$states $1"
}
timeout -k 10 300 sbatch --wait "${cpu[@]}" "$srcdir/slurm/run-ddp.sbatch" "${train[@]}" "${pre[@]}" \
    --metrics ref.jsonl --save-model ref.h5 > ref.submit 2>&1
rc=$? job=$(job_id ref.submit) log=mnist-ddp-$job.out
if [ "$rc" -eq 0 ] && [ -n "$(fingerprint ref.jsonl)" ] && [ -s ref.h5 ] && ! grep -q 'requeueing' "$log"; then
    pass "uninterrupted run-ddp.sbatch reference: fingerprint $(fingerprint ref.jsonl)"
else
    fail "uninterrupted reference job exited $rc" ref.submit "$log"
fi
sbatch "${cpu[@]}" "$srcdir/slurm/run-ddp.sbatch" "${train[@]}" "${pre[@]}" --metrics pre.jsonl \
    --save-model pre.h5 > pre.submit 2>&1
job=$(job_id pre.submit) log=mnist-ddp-$job.out
# The job's states in order, once each; the signal goes to the batch script once training is under way.
states='' signalled='' info=''
for _ in $(seq 900); do
    info=$(scontrol show job -o "$job" 2> /dev/null) || break
    st=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$info")
    note_state "$st"
    if [ -z "$signalled" ] && grep -q '^epoch 1 step 5/' "$log" 2> /dev/null; then
        scancel -s USR1 -b "$job" && signalled=1
    fi
    case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;; esac
    sleep 0.2
done
echo "preempted job $job: states$states; $(grep -Eo 'Restarts=[0-9]+|ExitCode=[0-9:]+' <<< "$info" | tr '\n' ' ')"
at=$(sed -n 's/^stopped by SIGUSR1 at step \([0-9]*\):.*/\1/p' "$log" 2> /dev/null)
if [ -n "$signalled" ] && [ "${states# }" = "RUNNING PENDING RUNNING COMPLETED" ] &&
    grep -q 'Restarts=1 ' <<< "$info" && [ -n "$at" ] && [ "$at" -lt 40 ] &&
    [ -f "$(printf 'checkpoints/%s/ckpt-%012d.h5' "$job" "$at")" ] &&
    sed -n "/requeueing job $job/,\$p" "$log" | grep -q "^resumed from step $at (restart 1)" &&
    [ "$(fingerprint pre.jsonl)" = "$(fingerprint ref.jsonl)" ] && same_model ref.h5 pre.h5; then
    pass "USR1 to the batch script: $(grep -m1 '^stopped by' "$log"); requeued, $(grep -m1 '^resumed from' "$log" | cut -d: -f1), same parameters as the reference"
else
    fail "preempted job $job (signalled: ${signalled:-no}, stopped at step ${at:-none}, states$states) did not requeue, resume and match the reference ($(fingerprint pre.jsonl) vs $(fingerprint ref.jsonl))" pre.submit "$log"
fi

# 9. A job whose time limit (1 minute) comes first stops by itself with a checkpoint before it: the end time
# comes from scontrol (Slurm 22.05 has no SLURM_JOB_END_TIME), the stop 30 s plus a few steps before it.
# The template's USR1 is replaced by a harmless CONT: Slurm may send it up to 60 s early, which here could
# stop the job before its own decision.
sbatch "${cpu[@]}" --time=1 --signal=B:CONT@5 "$srcdir/slurm/run-ddp.sbatch" --device cpu --epochs 14 \
    > limit.submit 2>&1
job=$(job_id limit.submit) log=mnist-ddp-$job.out
states=''
for _ in $(seq 500); do
    st=$(squeue -h -j "$job" -o %T 2> /dev/null)
    [ -n "$st" ] || break
    note_state "$st"
    [ "${states# }" = "RUNNING PENDING" ] && break
    sleep 0.2
done
scancel "$job" 2> /dev/null
at=$(sed -n "s/^stopped before the job's time limit at step \([0-9]*\) (\([0-9]*\) s left).*/\1/p" "$log" 2> /dev/null)
left=$(sed -n "s/^stopped before the job's time limit at step [0-9]* (\([0-9]*\) s left).*/\1/p" "$log" 2> /dev/null)
if [ "${states# }" = "RUNNING PENDING" ] && [ -n "$at" ] && [ "$left" -ge 20 ] &&
    [ -f "$(printf 'checkpoints/%s/ckpt-%012d.h5' "$job" "$at")" ] && grep -q "requeueing job $job" "$log" &&
    ! grep -q '^run-ddp: signal' "$log"; then
    pass "--time=1: $(grep -m1 '^the job ends in' "$log" | cut -d: -f1); $(grep -m1 '^stopped before' "$log" | cut -d: -f1), requeued"
else
    fail "--time=1 job $job (states$states) did not stop by itself with a checkpoint before its limit" limit.submit "$log"
fi

[ "$failures" -eq 0 ] || daemon_logs
echo "slurm-ddp: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
