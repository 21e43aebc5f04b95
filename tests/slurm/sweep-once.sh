#!/bin/bash
# run-array.sbatch's sweep table: written once and whole, also when tasks end together (two tasks that both
# saw every task finished each ran sweep-summary into one temporary file: NUL bytes in summary.tsv and in a
# job log, which made tests/multinode/slurm-nodes.sh fail now and then); a finished task run again does not
# train; a failed task ends the sweep too. No Slurm: the array's tasks run one
# after the other against a stand-in run-ddp.sbatch, from the state where both have finished training.
# Run by make check, or by hand: abs_top_srcdir=$PWD tests/slurm/sweep-once.sh
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d) || exit 99
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# A checkout whose run-ddp.sbatch only writes the summary line mnist_ddp would (to its --metrics file) and
# notes that it ran.
mkdir -p "$work/root/slurm" "$work/submit"
cp "$srcdir/slurm/run-array.sbatch" "$srcdir/slurm/sweep-summary" "$srcdir/slurm/sweep.tsv" "$work/root/slurm/"
cat > "$work/root/slurm/run-ddp.sbatch" << 'EOF'
while [ $# -gt 0 ]; do [ "$1" = --metrics ] && m=$2; shift; done
[ "$SLURM_ARRAY_TASK_ID" = "${STANDIN_FAIL:-}" ] && exit 3
echo '{"type":"summary","test_accuracy":0.5,"epochs":1,"wall_s":2.0,"images_per_s":100}' > "$m"
echo trained >> "$(dirname "$m")/trained"
EOF
# task N: run-array.sbatch as Slurm runs array task N of a 2-task array job 7; output in task-N.out.
task() {
    (cd "$work/submit" && env -u MNIST_DDP_RUNS -u MNIST_DDP_SWEEP MNIST_DDP_ROOT="$work/root" \
        SLURM_SUBMIT_DIR="$work/submit" SLURM_JOB_NAME=sweep SLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_ID="$1" \
        SLURM_ARRAY_TASK_COUNT=2 bash "$work/root/slurm/run-array.sbatch" > "$work/task-$1.out" 2>&1)
}
sweep=$work/submit/runs/sweep-7

# Task 1 ended (its exit file written) before task 0 counted the ended tasks; task 1 then runs again (requeued
# by someone after it finished) and counts them itself after task 0.
mkdir -p "$sweep/task-1"
echo '{"type":"summary","test_accuracy":0.5,"epochs":1,"wall_s":2.0,"images_per_s":100}' > "$sweep/task-1/metrics.jsonl"
echo 0 > "$sweep/task-1/exit"
task 0 || fail "task 0 exited $?: $(cat "$work/task-0.out")"
task 1 || fail "task 1 exited $?: $(cat "$work/task-1.out")"
tables=$(grep -l '^run-array: all 2 tasks done' "$work"/task-*.out | wc -l)
if [ "$tables" -eq 1 ]; then pass "two tasks that both saw the sweep finished: one table ($(grep -l '^run-array: all' "$work"/task-*.out | xargs -n1 basename))"
else fail "$tables tasks printed the sweep's table, expected 1"; fi
if [ "$(cut -f1 "$sweep/summary.tsv" | tr '\n' ' ')" = "task task-0 task-1 " ] && ! grep -q -P '\x00' "$sweep/summary.tsv"; then
    pass "summary.tsv: a header and one row per task"
else
    fail "summary.tsv: $(cat -A "$sweep/summary.tsv")"
fi
if [ ! -e "$sweep/task-1/trained" ] && grep -q '^run-array: task 1 of array job 7 finished already' "$work/task-1.out" &&
    [ "$(cat "$sweep/task-0/trained")" = trained ] && [ "$(cat "$sweep/task-0/exit")" = 0 ]; then
    pass "a finished task run again does not train: $(cat "$work/task-1.out")"
else
    fail "task 1 (finished) trained again or said nothing: $(cat "$work/task-1.out")"
fi

# A task that failed ends the sweep too: the last task to end prints the table, naming the failure.
rm -rf "$sweep"
STANDIN_FAIL=1 task 1
[ "$(cat "$sweep/task-1/exit" 2> /dev/null)" = 3 ] || fail "task 1 failed with 3, its exit file says '$(cat "$sweep/task-1/exit" 2>&1)'"
task 0 || fail "task 0 exited $?: $(cat "$work/task-0.out")"
if grep -q '^run-array: all 2 tasks done (failed: task-1)' "$work/task-0.out" &&
    [ "$(cut -f1,4 "$sweep/summary.tsv" | tr '\t\n' ': ')" = "task:test_accuracy_% task-0:50.00 task-1:- " ]; then
    pass "a failed task ends the sweep: $(grep '^run-array: all' "$work/task-0.out")"
else
    fail "after a failed task: $(cat "$work/task-0.out"; cat "$sweep/summary.tsv")"
fi

# sweep-summary's temporary file is its own: another writer's (here a leftover with that writer's name from
# before) is neither overwritten nor renamed over summary.tsv, and none of its own is left behind.
echo "another writer's table" > "$sweep/summary.tsv.tmp"
bash "$work/root/slurm/sweep-summary" "$sweep" > "$work/again.out" 2>&1 || fail "sweep-summary exited $?: $(cat "$work/again.out")"
left=$(find "$sweep" -maxdepth 1 -name '*summary.tsv?*' ! -name summary.tsv.tmp)
if [ "$(cat "$sweep/summary.tsv.tmp" 2>/dev/null)" = "another writer's table" ] && [ -z "$left" ] &&
    [ "$(cut -f1 "$sweep/summary.tsv" | tr '\n' ' ')" = "task task-0 task-1 " ]; then
    pass "sweep-summary writes through a temporary file of its own"
else
    fail "sweep-summary: the other writer's file holds '$(cat "$sweep/summary.tsv.tmp" 2>&1)', left: '$left', summary.tsv: $(cat "$sweep/summary.tsv")"
fi

# Tasks in their numeric order, whatever their number of digits: task-2 before task-10 (a plain sort puts
# task-10 and task-11 between task-1 and task-2).
many=$work/many
for t in 0 1 2 9 10 11; do
    mkdir -p "$many/task-$t"
    printf 'seed\n%s\n' "$t" > "$many/task-$t/row.tsv"
done
bash "$work/root/slurm/sweep-summary" "$many" > "$work/many.out" 2>&1 || fail "sweep-summary exited $?: $(cat "$work/many.out")"
order=$(cut -f1,2 "$many/summary.tsv" | tr '\t\n' ': ')
if [ "$order" = "task:seed task-0:0 task-1:1 task-2:2 task-9:9 task-10:10 task-11:11 " ]; then
    pass "summary.tsv in task order: $order"
else
    fail "summary.tsv's order: $order"
fi

echo "sweep-once: $failures failed"
[ "$failures" -eq 0 ]
