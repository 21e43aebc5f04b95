#!/bin/sh
# mnist_ddp's own training loop on 2 ranks with the simulated CUDA runtime, cuBLAS and NCCL
# (tests/gpu/gpu_mock_train): per optimizer step, no device allocation, no host wait but the one loss
# read-back of each log interval, and the last bucket's all-reduce enqueued before any host wait of the
# step (so it starts when backward ends); the same launches every step. Both models (convnet: the whole
# gradient in one bucket), both adversarial schedules. The metrics summary's per-step figures, counted by
# the backend's own launch wrappers and host waits (what a real GPU run reports), must match what the
# simulation saw. --profile --cuda-graph off: the same steps (no host wait or allocation per phase), and the
# CPU's table (see the end; tests/gpu/gpu-mock-graph.sh: --profile with graphs). No GPU needed.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_train
[ -x "$P" ] || skip "tests/gpu/gpu_mock_train not built (GPU build only)"
need_data
small_mnist "$TMP/small" 128 16
RUN_TIMEOUT=300
STEPS=11 INTERVAL=4

# Kernel launches per eager step (one micro-batch), derived from src/nn/model.c and src/gpu/cuda/nn_cuda.cu; "sum": a
# per-channel reduction (bias gradient), its slices and their finish, 2 launches.
# net:     gather 1; conv1: im2col, bias+ReLU 2; conv2: im2col, pool+bias+ReLU+flatten+dropout 2 (the fused
#          pool, MNIST_DDP_POOL's default); fc1: bias fill, ReLU, dropout 3; fc2: bias fill 1; loss: log-softmax,
#          loss sum, its gradient 3; fc2: sum 2; dropout, ReLU 2; fc1: sum 2; the pool's backward with dropout1
#          and conv2's bias sum 1 (its second pass in the last block); conv2: col2im+ReLU 1 (its im2col kept
#          from forward); conv1: sum 2, im2col 1 (no input gradient); Adadelta 1; the step's lr and key 1    = 25
# convnet: gather 1; per layer: bias fill, im2col, BatchNorm (statistics, apply), pool+ReLU 2 x 5; flatten 1;
#          fc: bias fill 1; loss 3; fc: sum 2; unflatten 1; per layer: ReLU+pool 1, BatchNorm backward 2,
#          sum 2 = 2 x 5; conv2: col2im 1; conv1: im2col 1; SGD 1; the step's lr and key 1                     = 33
# (unfused, each "+" pair two launches: 34 and 37; MNIST_DDP_POOL=composed, net: 30.)
expected_launches() { case $1 in net) echo 25 ;; convnet) echo 33 ;; *) fail "no launch count for $1" ;; esac; }

# check_steps REPORT LAUNCHES: the per-step lines of steps 1 .. STEPS-1 (the last runs into the end of the run;
# step 0 is the set-up before the first step), each with LAUNCHES kernel launches.
check_steps() {
  awk -v steps=$STEPS -v interval=$INTERVAL -v launches="$2" '
    $2 == 0 { next }
    { n++; s = $2; l = $4; w = $8; a = $10; b = $12; first = $14
      if (s != n) { print "step " s " out of order"; bad = 1 }
      if (a != 0) { print "step " s ": " a " device allocations"; bad = 1 }
      want = (s % interval == 0) ? 1 : 0
      if (w != want) { print "step " s ": " w " host waits, expected " want; bad = 1 }
      if (b < 1 || first != 1) { print "step " s ": last bucket not enqueued before the first host wait"; bad = 1 }
      if (n == 1) l1 = l; else if (l != l1) { print "step " s ": " l " launches, step 1 had " l1; bad = 1 } }
    END { if (n != steps - 1) { print n " steps reported, expected " steps - 1; bad = 1 }
          if (l1 != launches) { print l1 " kernel launches per step, expected " launches; bad = 1 }
          if (!bad) printf "%d launches per step", l1
          exit bad }' "$1"
}

# check_counts REPORT METRICS: the summary's kernels and GEMMs per step are the simulation's (every step
# alike), and its host waits per step one per progress line: every INTERVAL steps and at the last.
check_counts() {
  "$PYTHON3" - "$1" "$2" $STEPS $INTERVAL <<'PY'
import json, sys
report, metrics, steps, interval = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
line = [l.split() for l in open(report) if l.split()[1] == "1"][0]
want = {"kernels_per_step": float(line[3]), "gemms_per_step": float(line[5]),
        "host_waits_per_step": (steps // interval + (steps % interval != 0)) / steps}
s = [json.loads(l) for l in open(metrics) if '"summary"' in l][-1]
bad = ["%s %s, expected %.4f" % (k, s.get(k), v) for k, v in want.items() if abs(s.get(k, -1) - v) > 1e-3]
sys.exit("; ".join(bad) if bad else 0)
PY
}

for model in net convnet; do
  for policy in compute comm; do
    rep=$TMP/steps-$model-$policy
    # --seed 0: the parameters every rank initialises at creation, so the simulated broadcast (which keeps
    # each rank's data) leaves identical replicas. Eager steps (--cuda-graph off): tests/gpu/gpu-mock-graph.sh
    # checks the replayed ones.
    MOCK_POLICY=$policy MOCK_STEP_REPORT=$rep run_np 2 "$P" --device cuda --model "$model" --data "$TMP/small" \
      --seed 0 --batch-size 4 --test-batch-size 16 --epochs 1 --max-steps $STEPS --log-interval $INTERVAL \
      --cuda-graph off --metrics "$rep.json" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "$model, $policy eager: the run failed"; }
    msg=$(check_steps "$rep" "$(expected_launches "$model")") || { cat "$rep" >&2; fail "$model, $policy eager: $msg"; }
    cmsg=$(check_counts "$rep" "$rep.json" 2>&1) || fail "$model, $policy eager: metrics summary: $cmsg"
    echo "ok: $model, $policy eager: $msg, 1 host wait per $INTERVAL steps, no allocation"
  done
done

# --profile --cuda-graph off on the GPU: CUDA events on the compute stream, read back when the host waits anyway.
# The steps are those above (launches, one host wait per log interval, no allocation); the
# table has the rows of the same run on the CPU in the same order, every figure >= 0 and each max >= its
# mean, device time in every training row (each lap is at least its own event on the simulated stream), and
# says which clock it used (the JSON's "clock", one line above the table).
rep=$TMP/steps-profile
run_args="--model net --data $TMP/small --seed 0 --batch-size 4 --test-batch-size 16 --epochs 1 --max-steps $STEPS \
  --log-interval $INTERVAL --profile --cuda-graph off"
# shellcheck disable=SC2086 # run_args: words
MOCK_STEP_REPORT=$rep run_np 2 "$P" --device cuda $run_args --metrics "$rep.json" >"$TMP/out" 2>&1 ||
  { cat "$TMP/out" >&2; fail "--profile on the GPU: the run failed"; }
# The hold that starts each step (src/gpu/cuda/device.cu: the step's work then runs back to back) is one launch more.
msg=$(check_steps "$rep" $(($(expected_launches net) + 1))) || { cat "$rep" >&2; fail "--profile on the GPU: $msg"; }
cmsg=$(check_counts "$rep" "$rep.json" 2>&1) || fail "--profile on the GPU: metrics summary: $cmsg"
# shellcheck disable=SC2086
run_np 2 "$P" --device cpu $run_args --metrics "$TMP/cpu.json" >"$TMP/cpu.out" 2>&1 ||
  { cat "$TMP/cpu.out" >&2; fail "--profile on the CPU: the run failed"; }
rows=$("$PYTHON3" - "$rep.json" "$TMP/cpu.json" "$TMP/out" <<'PY'
import json, sys
gpu, cpu = ([json.loads(l) for l in open(p) if '"summary"' in l][-1] for p in sys.argv[1:3])
out = open(sys.argv[3]).read()
gp, cp = gpu["profile"], cpu["profile"]
rows = lambda p: [(ph["phase"], ph["training"]) for ph in p["phases"]]
bad = []
if rows(gp) != rows(cp):
    bad.append("rows %s, the CPU's %s" % (rows(gp), rows(cp)))
if (gp.get("clock"), cp.get("clock")) != ("cuda-events", "host"):
    bad.append("clocks %s (GPU), %s (CPU)" % (gp.get("clock"), cp.get("clock")))
if (gp.get("held"), cp.get("held")) != (True, False):
    bad.append("held %s (GPU), %s (CPU): the GPU's steps start with a hold, the CPU's not" % (gp.get("held"), cp.get("held")))
for name, p, base in (("GPU", gp, sum(ph["mean_s"] for ph in gp["phases"] if ph["training"])),
                      ("CPU", cp, cp["train_mean_s"])):
    if abs(p.get("share_of_s", -1) - base) > 2e-6 + 1e-4 * base:
        bad.append("%s: shares of %s s, not %.6f s (%s)" % (name, p.get("share_of_s"), base,
                   "the phases' sum: held steps" if p is gp else "the training time"))
if "profile: GPU time from CUDA events on the compute stream" not in out:
    bad.append("no line saying what the GPU times are")
bad += ["%s: max %s, mean %s" % (ph["phase"], ph["max_s"], ph["mean_s"]) for ph in gp["phases"]
        if not 0 <= ph["mean_s"] <= ph["max_s"] + 1e-9]
bad += ["%s: no device time" % ph["phase"] for ph in gp["phases"] if ph["training"] and ph["mean_s"] <= 0]
if gpu["graph_steps"] != 0:
    bad.append("%d steps replayed as a graph" % gpu["graph_steps"])
print("; ".join(bad) if bad else "%d rows" % len(gp["phases"]))
sys.exit(1 if bad else 0)
PY
) || { cat "$TMP/out"; fail "--profile on the GPU: $rows"; }
echo "ok: --profile on the GPU: $msg, no graph, the CPU's $rows"
