#!/bin/sh
# Does every kernel of a training step fill the GPU? With the simulated CUDA runtime (tests/gpu/gpu_mock_train),
# net trains 3 eager steps at the default batch (64) on 1 rank, in fp32 and tf32 and with each MNIST_DDP_* switch,
# and the simulation lists each kernel's grid sizes in the steps. A kernel launched with fewer blocks than an H100 or
# H200 has SMs (132), leaving SMs idle, fails unless tests/gpu/launch-shapes.tsv states why; a reason for a
# kernel that no longer runs that way fails too, so the list stays the set of kernels to widen, and so
# does a launch narrower than the list's fewest blocks for its kernel.
# The list is printed either way: the under-filled kernels of each path, their blocks and launches per step.
# No GPU needed.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_train
[ -x "$P" ] || skip "tests/gpu/gpu_mock_train not built (GPU build only)"
need_data
small_mnist "$TMP/small" 256 16
RUN_TIMEOUT=600
SMS=132

# shapes NAME PRECISION [VAR=VALUE]: the launch report of 3 steps in $TMP/NAME.shapes
runs=
shapes() {
  name=$1 prec=$2
  shift 2
  env "$@" MOCK_LAUNCH_REPORT="$TMP/$name.shapes" "$P" --device cuda --precision "$prec" --data "$TMP/small" \
    --seed 0 --epochs 1 --max-steps 3 --test-batch-size 16 --cuda-graph off --log-interval 100 >"$TMP/$name.out" 2>&1 ||
    { cat "$TMP/$name.out" >&2; fail "$name: the run failed"; }
  runs="$runs $name"
}
shapes default fp32
shapes tf32 tf32
shapes conv1direct fp32 MNIST_DDP_CONV1=direct
shapes headfused fp32 MNIST_DDP_HEAD=fused
shapes poolcomposed fp32 MNIST_DDP_POOL=composed
shapes conv2direct fp32 MNIST_DDP_CONV2=direct
shapes conv2direct-tf32 tf32 MNIST_DDP_CONV2=direct
shapes conv2-3xtf32 fp32 MNIST_DDP_CONV2=3xtf32
shapes fcepilogue fp32 MNIST_DDP_FC=epilogue

# shellcheck disable=SC2086 # runs: words
"$PYTHON3" - "$TMP" "$abs_top_srcdir/tests/gpu/launch-shapes.tsv" $SMS $runs <<'PY' || fail "launch shapes (above)"
import sys
tmp, table, sms, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
reasons, fewest = {}, {}
for line in open(table):
    if line.strip() and not line.startswith("#"):
        kernel, least, reason = line.rstrip("\n").split("\t")
        assert kernel not in reasons and reason.strip(), f"{table}: {kernel} twice, or without a reason"
        reasons[kernel], fewest[kernel] = reason, int(least)
narrow, bad = {}, []
for run in runs:
    rows = [l.split() for l in open(f"{tmp}/{run}.shapes")]
    assert rows, f"{run}: no kernel launched"
    for kernel, blocks, per_step in rows:
        if int(blocks) < sms:
            narrow.setdefault(kernel, []).append(f"{run}: {blocks} blocks x {per_step}/step")
        if int(blocks) < fewest.get(kernel, 0):
            bad.append(f"{kernel}: {blocks} blocks in {run}, fewer than the {fewest[kernel]} of {table}")
for kernel, where in sorted(narrow.items()):
    print(f"{kernel:<28} {'; '.join(where)}")
    if kernel not in reasons:
        bad.append(f"{kernel} leaves SMs idle ({where[0]}) and {table} says not why")
bad += [f"{k}: listed in {table}, but fills the GPU or no longer runs" for k in reasons if k not in narrow]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
echo "ok: every step kernel with fewer than $SMS blocks has its reason in tests/gpu/launch-shapes.tsv"
