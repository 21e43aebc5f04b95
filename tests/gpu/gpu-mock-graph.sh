#!/bin/sh
# The training step as a CUDA graph (--cuda-graph, src/train/step_graph.c), on 2 ranks with the simulated CUDA
# runtime, cuBLAS and NCCL (tests/gpu/gpu_mock_train, graphs in tests/gpu/gpu_mock_graph.c). No GPU needed.
# (1) a graph run and an eager run (--cuda-graph off) give the same losses, test results and parameters
#     over two epochs with a partial last batch and evaluations (in the simulation only GEMMs, copies
#     and all-reduces compute; kernels are counted and ordered), and their kernels read the same learning
#     rates and dropout keys (the simulation's digest of them, read from device memory when the kernel runs)
#     though epoch 2 has StepLR's new rate and a new key;
# (2) per step: the first eager, the second captured and launched, every later full batch one graph
#     launch, one kernel launch (the step's lr and key, written outside the graph) and one copy (the batch's ids,
#     outside the graph; none in it), the partial last batch
#     eager; one capture for the whole run (the rate and key are read from device memory, written before
#     each step outside the graph); no allocation, one host wait per log interval, the same device work per
#     step as eager in the summary;
# (3) a capture or instantiation that fails on one rank: one warning naming it, every rank eager, the
#     same results;
# (4) --accum-steps 2 never captures, not even its last step of one full micro-batch;
# (5) one rank armed alone (MNIST_DDP_ARM_ALONE=1) with the communication proxy: the results of the run without
#     the proxy, every step but the first replayed, the all-reduce reported.
# (6) --profile keeps the graphs (src/gpu/cuda/profile_clock.cu): stamp kernels inside them time the replayed
#     steps' phases. The results and replayed steps stay those without --profile (the stamps compute nothing of
#     the model's); the phases are the eager clock's, each with device time, each layer's the same time as with
#     events; and every step is timed, replayed or not: the optimizer's phase holds at least its kernel and its
#     stamp (20 us in the simulation) per step; the node cost of an empty kernel is calibrated (the simulation's
#     10 us an operation);
# (7) MNIST_DDP_BACKWARD=forked (the fc layers' weight gradients on a second stream, src/nn/layers.c): the same
#     results, replays and device work per step as the default, as a graph and eagerly, no race between the
#     streams (the simulation's detector), and each eager step's GEMMs on two streams (one by default).
# (8) MNIST_DDP_FC=epilogue (the fc layers' forward as cuBLASLt matmuls, src/gpu/cuda/gemm_cublas.cu): the same
#     replays and GEMMs per step as the default, 3 kernels fewer (fc1's bias fill and ReLU, fc2's bias fill), the
#     same results as a graph and eagerly, no race.
# (9) a backend without step_scalars (MOCK_NO_STEP_SCALARS=1, tests/gpu/gpu_mock_main.c): lr and the dropout key
#     freeze in a graph, so epoch 2's new key alone (--gamma 1) makes it capture another; the eager run's results;
#     and with StepLR, eagerly, the rates and keys the struct gave the kernels in (1).
# (9) the other kernels that take the rate or key (the fused head, conv2 direct's dropout, SGD): one capture, the
#     eager run's results and reads.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_train
[ -x "$P" ] || skip "tests/gpu/gpu_mock_train not built (GPU build only)"
need_data
# 100 samples, 2 ranks x batch 4: 12 full steps and a partial 13th (4 samples) per epoch. 104 for (4).
small_mnist "$TMP/small" 100 16
small_mnist "$TMP/small104" 104 16
RUN_TIMEOUT=300
INTERVAL=4

# train NAME ARGS...: 2 epochs of net; metrics in $TMP/NAME.json, per-step report in $TMP/NAME.rep. Epoch 2 has
# a new learning rate (StepLR's gamma 0.7) and a new dropout key: one graph replays both epochs.
train() {
  name=$1; shift
  MOCK_POLICY=${POLICY:-compute} MOCK_STEP_REPORT=$TMP/$name.rep run_np "${NP:-2}" "$P" --device cuda \
    --data "${DATA:-$TMP/small}" \
    --seed 0 --batch-size 4 --test-batch-size 16 --epochs 2 --log-interval $INTERVAL \
    --metrics "$TMP/$name.json" \
    "$@" >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out" >&2; fail "$name: the run failed"; }
}

# scalars NAME: each rank's count and digest of the lr and keys its kernels read (tests/gpu/gpu_mock_main.c).
scalars() { grep "reads of the step's lr" "$TMP/$1.out" | sort; }

# same A B [KEY]: the epochs' losses and test results and the summary's figures (but timings, and KEY) agree, and
# so do the learning rates and dropout keys the kernels read.
same() {
  [ "$(scalars "$1")" = "$(scalars "$2")" ] || fail "$1 and $2: the kernels read other rates or keys:
$(scalars "$1")
$(scalars "$2")"
  "$PYTHON3" - "$TMP/$1.json" "$TMP/$2.json" "${3:-}" <<'PY' || fail "$1 and $2 differ"
import json, sys
keys = [k for k in ("fingerprint", "steps", "kernels_per_step", "gemms_per_step", "host_waits_per_step",
                    "graph_steps") if k != sys.argv[3]]
def load(p):
    rows = [json.loads(l) for l in open(p)]
    ep = [{k: r[k] for k in ("train_loss", "test_loss", "correct")} for r in rows if r["type"] == "epoch"]
    s = [r for r in rows if r["type"] == "summary"][-1]
    return ep, {k: s[k] for k in keys}
a, b = load(sys.argv[1]), load(sys.argv[2])
if len(a[0]) != 2 or a != b:
    sys.exit("%s\n%s" % (a, b))
PY
}

graph_steps() { json_field "$TMP/$1.json" summary graph_steps; }
captures() { json_field "$TMP/$1.json" summary graph_captures; }

# check_steps REPORT: epoch 1's steps 1-13 and epoch 2's 14-25 (the 26th runs into the end of the run).
check_steps() {
  awk -v interval=$INTERVAL '
    { s = $2; l = $4; gm = $6; w = $8; a = $10; gr = $16; cp = $18; gcp = $20
      if (s == 0) next
      n++
      if (a != 0) { print "step " s ": " a " device allocations"; bad = 1 }
      if (s <= 12 && w != (s % interval == 0)) { print "step " s ": " w " host waits"; bad = 1 }
      if (s == 1 || s == 13) {
        if (gr != 0 || l < 1) { print "step " s " (eager): " gr " graph launches, " l " kernel launches"; bad = 1 }
      } else if (gr != 1 || l != 1 || gm != 0 || cp != 1 || gcp != 0) {
        print "step " s ": " gr " graph launches, " l " kernel launches, " gm " GEMMs, " cp " copies, " gcp \
          " copies in the graph"; bad = 1 } }
    END { if (n != 25) { print n " steps reported, expected 25"; bad = 1 }
          exit bad }' "$1"
}

for POLICY in compute comm; do
  train eager-$POLICY --cuda-graph off
  [ "$(graph_steps eager-$POLICY)" = 0 ] || fail "--cuda-graph off: steps were replayed"
  train graph-$POLICY
  [ "$(captures graph-$POLICY)" = 1 ] ||
    fail "$POLICY: $(captures graph-$POLICY) captures, expected 1 (a new lr and key are no new graph)"
  scalars graph-$POLICY | grep -q ": [1-9][0-9]* reads" || fail "$POLICY: no kernel read the step's lr or key"
  [ "$(graph_steps graph-$POLICY)" = 23 ] ||
    fail "$POLICY: $(graph_steps graph-$POLICY) graph steps, expected 23 (26 but the first and the 2 partial)"
  same eager-$POLICY graph-$POLICY graph_steps
  msg=$(check_steps "$TMP/graph-$POLICY.rep") || { cat "$TMP/graph-$POLICY.rep" >&2; fail "$POLICY: $msg"; }
  ! grep "warning:" "$TMP/graph-$POLICY.out" | grep -qv "take turns" || # (src/comm/cpu_fit.c's: the machine's)
    fail "$POLICY: a capture warning without a failure"
  echo "ok: $POLICY schedule: graph run = eager run; per step one graph launch, no kernel launch, no allocation"
done
POLICY=compute

for call in cudaStreamBeginCapture:0 cudaStreamEndCapture:1 cudaGraphInstantiate:1; do
  MOCK_FAIL=${call%:*} MOCK_FAIL_RANK=${call#*:}
  export MOCK_FAIL MOCK_FAIL_RANK
  train "fail-$MOCK_FAIL"
  unset MOCK_FAIL MOCK_FAIL_RANK
  out=$TMP/fail-${call%:*}.out
  [ "$(grep -c 'warning: .*CUDA graph' "$out")" = 1 ] || { cat "$out"; fail "${call%:*} failing: not one warning"; }
  grep -q "rank ${call#*:} could not capture .*${call%:*}" "$out" ||
    { cat "$out"; fail "${call%:*}: the warning does not name the rank and call"; }
  [ "$(graph_steps fail-${call%:*})" = 0 ] || fail "${call%:*} failing: steps were still replayed"
  same eager-compute fail-${call%:*} graph_steps
  echo "ok: ${call%:*} failing on rank ${call#*:}: one warning, every rank eager, the same results"
done

# 13 micro-batches of 8: 7 steps, the last one micro-batch (a full one) that a graph could replay.
DATA=$TMP/small104 train accum --accum-steps 2 --cuda-graph on
[ "$(graph_steps accum)" = 0 ] || fail "--accum-steps 2: $(graph_steps accum) steps replayed as a graph"
awk '$16 != 0 { bad = 1 } END { exit bad }' "$TMP/accum.rep" || fail "--accum-steps 2: a graph launch in the report"
echo "ok: --accum-steps 2 never captures"

# The proxy moves copies of the gradients elsewhere: the results stay those of the same run without it.
export MNIST_DDP_ARM_ALONE=1
NP=1 train alone
MNIST_DDP_COMM_PROXY=370:8 NP=1 train alone-proxy
unset MNIST_DDP_ARM_ALONE
same alone alone-proxy
[ "$(graph_steps alone-proxy)" = 49 ] || fail "alone with the proxy: $(graph_steps alone-proxy) graph steps, expected 49 (50 but the first)"
grep -q '^all-reduce: .* blocking for .* exposed per step in 2 buckets' "$TMP/alone-proxy.out" ||
  { cat "$TMP/alone-proxy.out"; fail "alone with the proxy: no all-reduce line"; }
echo "ok: 1 rank armed alone with the communication proxy: the same results, replayed, the all-reduce reported"

train profile-graph --profile
same graph-compute profile-graph kernels_per_step
grep -q '^profile: an empty kernel costs 10\.00 us a node in a replayed graph of 35 (200 replays)$' \
  "$TMP/profile-graph.out" || { cat "$TMP/profile-graph.out"; fail "--profile with graphs: no node cost (10 us an operation)"; }
train profile-eager --profile --cuda-graph off
msg=$("$PYTHON3" - "$TMP/profile-graph.json" "$TMP/profile-eager.json" "$TMP/graph-compute.json" <<'PY'
import json, sys
g, e, plain = ([json.loads(l) for l in open(p) if '"summary"' in l][-1] for p in sys.argv[1:4])
gp, ep = g["profile"], e["profile"]
rows = lambda p: [(ph["phase"], ph["training"]) for ph in p["phases"]]
bad = []
if (gp.get("clock"), gp.get("held")) != ("graph-stamps", True):
    bad.append("clock %s, held %s" % (gp.get("clock"), gp.get("held")))
if rows(gp) != rows(ep):
    bad.append("rows %s, the eager clock's %s" % (rows(gp), rows(ep)))
bad += ["%s: no device time" % ph["phase"] for ph in gp["phases"] if ph["training"] and ph["mean_s"] <= 0]
# In the simulation a stamp and an event are one operation each: a layer's phase is the same time in both clocks.
# Not the exchange's (a replayed step orders NCCL's operations as captured), nor the host's launches between steps.
mean = lambda p: {ph["phase"]: ph["mean_s"] for ph in p["phases"] if ph["training"]}
bad += ["%s: %.6f s, the eager clock's %.6f s" % (k, v, mean(ep).get(k, -1)) for k, v in mean(gp).items()
        if k not in ("all-reduce wait", "progress, stop checks") and abs(v - mean(ep).get(k, -1)) > 1e-9]
opt = [ph["mean_s"] for ph in gp["phases"] if ph["phase"] == "optimizer"]
if not opt or opt[0] < g["steps"] * 2e-5 - 1e-9:
    bad.append("optimizer %s s over %d steps: not every step timed" % (opt, g["steps"]))
if g["kernels_per_step"] <= plain["kernels_per_step"]:
    bad.append("%s kernels per step, %s without --profile: no stamp in the step" %
               (g["kernels_per_step"], plain["kernels_per_step"]))
print("; ".join(bad) if bad else "%d rows, optimizer %.0f us per step" % (len(gp["phases"]), 1e6 * opt[0] / g["steps"]))
sys.exit(1 if bad else 0)
PY
) || { cat "$TMP/profile-graph.out"; fail "--profile with graphs: $msg"; }
echo "ok: --profile with graphs: the same results, $(graph_steps profile-graph) steps replayed, $msg"

MNIST_DDP_BACKWARD=forked train forked-graph
same graph-compute forked-graph
MNIST_DDP_BACKWARD=forked train forked-eager --cuda-graph off
same eager-compute forked-eager
gemm_streams() { awk '$2 >= 1 && $2 <= 12 { print $22 }' "$TMP/$1.rep" | sort -u | tr '\n' ' '; }
[ "$(gemm_streams forked-eager)" = "2 " ] || fail "forked, eager: GEMMs on $(gemm_streams forked-eager)streams per step, not 2"
[ "$(gemm_streams eager-compute)" = "1 " ] || fail "the default, eager: GEMMs on $(gemm_streams eager-compute)streams per step"
echo "ok: MNIST_DDP_BACKWARD=forked: the same results as a graph and eagerly, GEMMs on 2 streams, no race"

MNIST_DDP_FC=epilogue train epilogue-graph
MNIST_DDP_FC=epilogue train epilogue-eager --cuda-graph off
same epilogue-graph epilogue-eager graph_steps
kernels() { json_field "$TMP/$1.json" summary kernels_per_step; }
awk -v a="$(kernels graph-compute)" -v b="$(kernels epilogue-graph)" 'BEGIN { exit !(a - b == 3) }' ||
  fail "MNIST_DDP_FC=epilogue: $(kernels epilogue-graph) kernels per step, the default $(kernels graph-compute): not 3 fewer"
same graph-compute epilogue-graph kernels_per_step
echo "ok: MNIST_DDP_FC=epilogue: 3 kernels fewer per step, the same replays and GEMMs, graph = eager, no race"

export MOCK_NO_STEP_SCALARS=1
train by-value-eager --gamma 1 --cuda-graph off
train by-value --gamma 1
train by-value-steplr --cuda-graph off
unset MOCK_NO_STEP_SCALARS
[ "$(captures by-value)" = 2 ] || fail "without step_scalars: $(captures by-value) captures, expected 2 (one per key)"
same by-value-eager by-value graph_steps
# The values the kernels read from the struct are those passed by value: what the host wrote is what they read
# (one kernel more a step writes them).
same by-value-steplr eager-compute kernels_per_step
echo "ok: without step_scalars: a graph per dropout key, the eager run's results; with it, the same reads"

export MNIST_DDP_HEAD=fused MNIST_DDP_CONV2=direct
train variants-eager --optimizer sgd --momentum 0.5 --cuda-graph off
train variants --optimizer sgd --momentum 0.5
unset MNIST_DDP_HEAD MNIST_DDP_CONV2
[ "$(captures variants)" = 1 ] || fail "fused head, conv2 direct, SGD: $(captures variants) captures, expected 1"
same variants-eager variants graph_steps
echo "ok: fused head, conv2 direct, SGD: one capture, the eager run's results and reads"
