#!/bin/sh
# One GPU standing for eight (a GPU machine; SKIP without a usable GPU): MNIST_DDP_ARM_ALONE=1 runs NCCL's
# all-reduce in the captured step as with peers, and MNIST_DDP_COMM_PROXY adds after each bucket the traffic and
# time of an 8-GPU ring at a bus bandwidth: NVLink-like 370 GB/s and network-like 25 GB/s (200 Gb/s). One epoch
# each, the default step (a CUDA graph, timed per replay). Checks: the parameters of the unarmed run (neither the
# exchange of one rank nor the proxy changes a gradient); the proxy calibrated: the isolated all-reduce takes at
# least its target, 4.8 MB x 2 x 7/8 at the bandwidth, and at most twice that plus 50 us (NCCL's own 1-rank
# all-reduce and the launches). Prints a table: images/s, the exposed all-reduce per step and the hidden share.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e

need_gpu

# train NAME [VAR=VALUE...]: one epoch on the GPU with the environment given; metrics in $TMP/NAME.json.
train() {
  name=$1; shift
  (for kv in "$@"; do export "${kv?}"; done
    run_np 1 "$MNIST_DDP" --device cuda --data "$MNIST_DATA" --epochs 1 --seed 4 --metrics "$TMP/$name.json") \
    >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "$name: the run failed"; }
  grep '^all-reduce:' "$TMP/$name.log" || true
}
train plain
train alone MNIST_DDP_ARM_ALONE=1
train nvlink MNIST_DDP_ARM_ALONE=1 MNIST_DDP_COMM_PROXY=370:8
train network MNIST_DDP_ARM_ALONE=1 MNIST_DDP_COMM_PROXY=25:8

"$PYTHON3" - "$TMP" <<'PY' || fail "the proxy runs are not as expected"
import json, sys
def summary(name):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.json") if l.strip()]
    return [r for r in rows if r["type"] == "summary"][-1]
runs = {n: summary(n) for n in ("plain", "alone", "nvlink", "network")}
print(f"{'run':<28}{'images/s':>10}{'blocking ms':>13}{'exposed ms/step':>17}{'hidden':>8}")
for n, label in (("plain", "1 GPU"), ("alone", "1 GPU armed alone"), ("nvlink", "proxy 370 GB/s, 8 GPUs"),
                 ("network", "proxy 25 GB/s, 8 GPUs")):
    s = runs[n]
    print(f"{label:<28}{s['images_per_s']:>10.0f}{s['allreduce_blocking_ms']:>13.3f}"
          f"{s['allreduce_exposed_ms']:>17.3f}{100 * s['allreduce_hidden']:>7.0f}%")
bad = [n for n in runs if runs[n]["fingerprint"] != runs["plain"]["fingerprint"]]
assert not bad, f"parameters differ from the unarmed run: {bad}"
grad_bytes = 4 * 1199882
for n, gbps in (("nvlink", 370), ("network", 25)):
    target = 1e3 * grad_bytes * 2 * 7 / 8 / (gbps * 1e9)
    got = runs[n]["allreduce_blocking_ms"]
    print(f"{n}: isolated all-reduce {got:.3f} ms, the proxy's target {target:.3f} ms ({got / target:.2f}x)")
    assert target <= got <= 2 * target + 0.05, f"{n}: {got:.3f} ms is not within [1, 2] x {target:.3f} ms + 0.05"
print("ok: the proxy runs end with the unarmed parameters; the proxy takes its target time")
PY
