#!/bin/sh
# --profile: where the time went. On 2 ranks, a few steps with checkpoints: the table is printed and is in
# the --metrics summary, with a row per layer section of the model (forward and backward, named as in
# PyTorch) and the trainer's phases; every figure is >= 0 and each max >= its mean; the training phases
# add up to the training time the trainer measures on its own clock (within 2% + 5 ms: the clock reads
# between laps), so a checkpoint write or an evaluation pass counted as training, or a phase that loses
# its time, shows; the phases outside training match the summary's own figures. Without --profile: no
# table. Peak memory: the summary's peak RSS per rank lies between the model's parameters, gradients and
# Adadelta state (16 bytes per parameter) and the machine's RAM.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 768 samples: 6 steps of 2 x 64.
small_mnist "$TMP/small" 768 200
run() { # run NAME ARGS...: 2 ranks, metrics in NAME.jsonl, output in NAME.out
  name=$1; shift
  run_np 2 "$MNIST_DDP" --data "$TMP/small" --epochs 1 --log-interval 2 --metrics "$TMP/$name.jsonl" "$@" \
    >"$TMP/$name.out" 2>&1 || { cat "$TMP/$name.out"; fail "run $name"; }
}
run net --profile --checkpoint-dir "$TMP/ck" --checkpoint-every 1
run convnet --profile --model convnet --batch-size 64
run plain

check() { # check NAME PHASES...: the profile of run NAME has these training phases, in this order
  "$PYTHON3" - "$TMP/$1.out" "$TMP/$1.jsonl" "$@" <<'PY'
import json, re, sys
out, jsonl, name, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
text = open(out).read()
s = [json.loads(l) for l in open(jsonl) if l.strip()]
s = [r for r in s if r["type"] == "summary"][-1]
p = s["profile"]
def bad(msg):
    sys.exit(f"{name}: {msg}\n{text}")
if p["ranks"] != 2 or s["world"] != 2:
    bad(f"profile over {p['ranks']} ranks")
phases = {ph["phase"]: ph for ph in p["phases"]}
train = [ph["phase"] for ph in p["phases"] if ph["training"]]
outside = [ph["phase"] for ph in p["phases"] if not ph["training"]]
if train != want:
    bad(f"training phases {train}, expected {want}")
if sorted(outside) != sorted(["start-up", "data load", "evaluation", "checkpoint writes"]):
    bad(f"phases outside training: {outside}")
for ph in p["phases"] + [{"phase": "training", "max_s": p["train_max_s"], "mean_s": p["train_mean_s"]}]:
    if not 0 <= ph["mean_s"] <= ph["max_s"] + 1e-9:
        bad(f"phase {ph['phase']}: max {ph['max_s']}, mean {ph['mean_s']}")
# Rank 0's own figures in the summary lie between the two ranks' (min = 2 mean - max) and its training time
# is the summary's.
for key, ph in (("train_s", "training"), ("startup_s", "start-up"), ("data_s", "data load"),
                ("eval_s", "evaluation"), ("checkpoint_s", "checkpoint writes")):
    mx, mean = (p["train_max_s"], p["train_mean_s"]) if ph == "training" else \
        (phases[ph]["max_s"], phases[ph]["mean_s"])
    if not 2 * mean - mx - 2e-3 <= s[key] <= mx + 2e-3:
        bad(f"summary {key} {s[key]} outside the ranks' {ph} [{2 * mean - mx}, {mx}]")
total = sum(phases[n]["mean_s"] for n in train)
if abs(total - p["train_mean_s"]) > 0.02 * p["train_mean_s"] + 0.005:
    bad(f"training phases add up to {total:.4f} s, the trainer's clock says {p['train_mean_s']:.4f} s")
if sum(phases[n]["max_s"] for n in train) < 0.98 * p["train_max_s"] - 0.005:
    bad("the phases' maxima add up to less than the longest training time")
# The convolutions are most of the work: their rows cannot be empty.
for n in train:
    if re.match(r"(conv\d|layer\d\.0) (forward|backward)$", n) and phases[n]["mean_s"] <= 0:
        bad(f"{n}: no time")
rows = [l for l in text.splitlines() if re.match(r"^  (\S.*\S) +\d+\.\d{3} +\d+\.\d{3}", l)]
if not re.search(r"^profile: seconds per phase, max and mean over 2 ranks", text, re.M) or len(rows) != len(phases) + 1:
    bad(f"the printed table has {len(rows)} rows for {len(phases)} phases and the total")
print(f"ok: {name}: {len(train)} training phases add up to {total:.3f} of {p['train_mean_s']:.3f} s")
PY
}
check net "batch gather" "conv1 forward" "conv2 forward" "dropout1 forward" "fc1 forward" \
  "dropout2 forward" "fc2 forward" loss "fc2 backward" "dropout2 backward" "fc1 backward" "dropout1 backward" \
  "conv2 backward" "conv1 backward" "all-reduce wait" optimizer "progress, stop checks"
check convnet "batch gather" "layer1.0 forward" "layer1.1 forward" "layer1.2-3 forward" \
  "layer2.0 forward" "layer2.1 forward" "layer2.2-3 forward" "fc forward" loss "fc backward" \
  "layer2.2-3 backward" "layer2.1 backward" "layer2.0 backward" "layer1.2-3 backward" "layer1.1 backward" \
  "layer1.0 backward" "all-reduce wait" optimizer "progress, stop checks"
grep -q '^profile:' "$TMP/plain.out" && { cat "$TMP/plain.out"; fail "a profile without --profile"; }
grep -q '"profile"' "$TMP/plain.jsonl" && fail "a profile in the summary without --profile"

# Peak memory, with and without --profile.
params=$(sed -n 's/^model net: \([0-9]*\) parameters.*/\1/p' "$TMP/plain.out")
[ -n "$params" ] || { cat "$TMP/plain.out"; fail "no parameter count in the output"; }
ram_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
for name in net plain; do
  rss=$(json_field "$TMP/$name.jsonl" summary peak_rss_mib)
  "$PYTHON3" -c "import sys; r = float(sys.argv[1]); sys.exit(not 16 * $params / 2**20 < r < $ram_kib / 1024)" "$rss" ||
    fail "$name: peak RSS $rss MiB outside (16 bytes x $params parameters, RAM $ram_kib KiB)"
  grep -q "^summary: .*, peak memory $(printf '%.0f' "$rss") MiB per rank$" "$TMP/$name.out" ||
    { cat "$TMP/$name.out"; fail "$name: the summary line does not show the peak memory $rss MiB"; }
  echo "ok: $name: peak RSS $rss MiB per rank (max over ranks)"
done
