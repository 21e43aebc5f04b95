#!/bin/sh
# Options reach the run: --weight-decay and --momentum change SGD's and Adadelta's steps exactly as
# torch.optim defines them (checked against a numpy step from the gradient of a plain SGD run), and
# --bucket-mb changes how the gradient is cut into all-reduces but not one bit of the result; one node
# runs no MPI progress thread (--comm-progress).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/small" 200 100
# Same seed, data and batches everywhere: runs differ only in the options under test.
common="--data $TMP/small --batch-size 16 --seed 3 --log-interval 1"
train() { # train NAME ARGS...: 2 ranks, model in $TMP/NAME.h5, metrics in NAME.json, output in NAME.log
  name=$1; shift
  # shellcheck disable=SC2086
  run_np 2 "$MNIST_DDP" $common --metrics "$TMP/$name.json" --save-model "$TMP/$name.h5" "$@" \
    >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "run $name"; }
}
sgd="--epochs 1 --optimizer sgd --lr 1"
train p0 --epochs 0 # the initial parameters
# shellcheck disable=SC2086
{
  train sgd1 $sgd --max-steps 1
  train sgd1_wd $sgd --max-steps 1 --weight-decay 0.1
  train sgd2 $sgd --max-steps 2
  train sgd2_mom $sgd --max-steps 2 --momentum 0.9
  train ada1_wd --epochs 1 --optimizer adadelta --lr 1 --max-steps 1 --weight-decay 0.1
}

# The first step's gradient g is the same in every run (same parameters, samples and dropout masks), and
# plain SGD with lr 1 gives it: g = p0 - sgd1. From it, torch.optim's update rules predict the others;
# the second step's gradient is the same with and without momentum (both start it from sgd1), so
# momentum m adds exactly -m g to it. Each option must move the parameters by far more than the tolerance.
"$PYTHON3" - "$TMP" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
def load(n):
    with h5py.File(f"{d}/{n}.h5", "r") as f:
        return {k: f[k][()].astype(np.float64) for k in f}
p0, sgd1, sgd2 = load("p0"), load("sgd1"), load("sgd2")
g = {k: p0[k] - sgd1[k] for k in p0}
def sgd_step1(k, wd):
    return p0[k] - (g[k] + wd * p0[k])
def sgd_step2(k, m):
    return sgd2[k] - m * g[k]
def adadelta_step1(k, wd, eps=1e-6, rho=0.9):
    gw = g[k] + wd * p0[k]
    return p0[k] - np.sqrt(eps) / np.sqrt((1 - rho) * gw * gw + eps) * gw
tol = 1e-5  # float32 rounding of values below 1 in a step or two; the effects checked are > 1e-3
for name, rule, value in (("sgd1_wd", sgd_step1, 0.1), ("sgd2_mom", sgd_step2, 0.9), ("ada1_wd", adadelta_step1, 0.1)):
    got, effect = load(name), 0.0
    for k in p0:
        want = rule(k, value)
        err = float(np.max(np.abs(got[k] - want)))
        if err > tol:
            sys.exit(f"{name}: {k} is off the torch.optim update by {err:.3g}")
        effect = max(effect, float(np.max(np.abs(want - rule(k, 0.0)))))
    if effect < 100 * tol:
        sys.exit(f"{name}: the option moves the parameters by only {effect:.3g}: the check proves nothing")
    print(f"{name}: matches torch.optim's update (the option moves parameters by up to {effect:.3g})")
PY

# --bucket-mb: all-reduces of 2 ranks sum two floats per element, whatever the chunking, so every bucket
# size gives the default's final parameters bit for bit; the bucket counts show the option was used.
fingerprint() { json_field "$TMP/$1.json" summary fingerprint; }
buckets() { sed -n 's/^all-reduce: .* in \([0-9]*\) buckets*[:,].*/\1/p' "$TMP/$1.log"; }
ref=$(fingerprint sgd2) ref_buckets=$(buckets sgd2)
for mb in 0 0.0001 10000; do
  # shellcheck disable=SC2086
  train "bucket$mb" $sgd --max-steps 2 --bucket-mb "$mb"
  [ "$(fingerprint "bucket$mb")" = "$ref" ] ||
    fail "--bucket-mb $mb: final parameters $(fingerprint "bucket$mb") differ from the default's $ref"
  echo "--bucket-mb $mb: $(buckets "bucket$mb") bucket(s) (default $ref_buckets), same parameters ($ref)"
done
[ "$(buckets bucket10000)" -eq 1 ] || fail "--bucket-mb 10000 did not reduce the gradient in one bucket"
for mb in 0 0.0001; do
  [ "$(buckets "bucket$mb")" -gt "$ref_buckets" ] || fail "--bucket-mb $mb did not cut the gradient in more buckets"
done

# --comm-progress: the progress thread runs only across nodes (tests/multinode/mpirun-nodes.sh); on one node
# the summary reports none, whatever the interval.
# shellcheck disable=SC2086
train progress20 $sgd --max-steps 2 --comm-progress 20
for run in sgd2 progress20; do
  ! grep -q 'progress thread' "$TMP/$run.log" || fail "$run: a progress thread on one node"
done

# --dry-run: one step of one epoch whatever --epochs says, but --epochs 0 stays an evaluation of the initial
# parameters (p0's).
train dry --dry-run --epochs 5
train dry0 --dry-run --epochs 0
[ "$(json_field "$TMP/dry.json" summary steps)" = 1 ] || fail "--dry-run --epochs 5: not one step"
[ "$(json_field "$TMP/dry0.json" summary steps)" = 0 ] || fail "--dry-run --epochs 0: $(json_field "$TMP/dry0.json" summary steps) steps"
[ "$(json_field "$TMP/dry0.json" summary fingerprint)" = "$(json_field "$TMP/p0.json" summary fingerprint)" ] ||
  fail "--dry-run --epochs 0: the parameters changed"
echo "ok: --dry-run trains one step, and none with --epochs 0"

# A training batch above evaluation's chunk of 256 with a larger --test-batch-size: the model holds the
# training batch (it once held 256 there, and such a run stopped at its first step, or crashed).
small_mnist "$TMP/wide" 600 300
run_np 2 "$MNIST_DDP" --data "$TMP/wide" --batch-size 300 --test-batch-size 1000 --epochs 1 >"$TMP/wide.log" 2>&1 ||
  { cat "$TMP/wide.log"; fail "--batch-size 300 --test-batch-size 1000"; }
grep -q '^epoch 1: .*test accuracy [0-9.]*% ([0-9]*/300)' "$TMP/wide.log" || { cat "$TMP/wide.log"; fail "no evaluation"; }
echo "ok: --batch-size 300 --test-batch-size 1000 trains and evaluates"
