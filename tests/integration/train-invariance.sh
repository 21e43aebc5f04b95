#!/bin/sh
# World-size invariance: for a fixed seed, 1 rank x 64, 2 ranks x 32, 4 ranks x 16 and 1 rank x 32 with
# 2 accumulation steps all train on the same global batches with the same dropout masks, so they must
# follow the same trajectory up to floating-point summation order.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
steps=5
common="--data $MNIST_DATA --max-steps $steps --log-interval 1 --seed 7 --epochs 1"
train() { # train NAME NP ARGS...
  name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  run_np "$np" "$MNIST_DDP" $common --metrics "$TMP/$name.json" --save-model "$TMP/$name.h5" "$@" \
    >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "run $name"; }
}
train w1 1 --batch-size 64
train w2 2 --batch-size 32
train w4 4 --batch-size 16
train acc 1 --batch-size 32 --accum-steps 2

"$PYTHON3" - "$TMP" <<'PY'
import json, sys, h5py, numpy as np
d = sys.argv[1]
def load(n):
    with h5py.File(f"{d}/{n}.h5", "r") as f:
        return {k: f[k][()] for k in f}
def losses(n):
    return [r["loss"] for r in map(json.loads, open(f"{d}/{n}.json")) if r["type"] == "step"]
ref, ref_loss = load("w1"), losses("w1")
# float32 sums in another order differ by ~1e-7 relative (2e-7 measured through step 8); a wrong
# split (other samples or masks) moves weights by ~1e-2. Over longer runs a near-tie in a max-pool or
# ReLU can resolve differently under another GEMM blocking and shift a few weights by ~1e-4 at once
# (seen at step 9 with seed 7), so the comparison stops at 5 steps with a tolerance of 1e-5.
worst = 0.0
for n in ("w2", "w4", "acc"):
    p = load(n)
    for k, v in ref.items():
        if k.endswith("num_batches_tracked"):
            continue
        err = float(np.max(np.abs(p[k] - v)) / (np.max(np.abs(v)) + 1e-12))
        worst = max(worst, err)
        if err > 1e-5:
            sys.exit(f"{n}: {k} differs from 1 rank x 64 by {err:.3g} (relative to its scale)")
    l = losses(n)
    if len(l) != len(ref_loss) or max(abs(a - b) for a, b in zip(l, ref_loss)) > 1e-5:
        sys.exit(f"{n}: loss trajectory {l} differs from {ref_loss}")
print(f"world-size invariance holds: worst relative parameter difference {worst:.2e}")
PY
