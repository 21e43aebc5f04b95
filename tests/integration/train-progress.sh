#!/bin/sh
# Reading a running job: each progress line gives the fraction of the epoch done and the time left in the
# epoch and in the run (steps left there times the measured mean step time, across epochs and under
# --max-steps, and after a resume mid-epoch), with the same numbers in the --metrics step lines; the step time is
# that of the run; a pipe
# gets plain lines, never a carriage return, while a terminal (a process started alone) gets one updating
# line. The summary's time line accounts for the wall-clock time: start-up, data loading, training,
# evaluation and checkpoints add up to no more than the wall time (checkpoint writes are not training).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 1280 samples: 10 steps of 2 x 64 per epoch.
small_mnist "$TMP/small" 1280 200
common="--data $TMP/small --seed 2 --log-interval 3"
run() { # run NAME ARGS...: 2 ranks, metrics in NAME.jsonl, output (a pipe) in NAME.out
  name=$1; shift
  # shellcheck disable=SC2086
  run_np 2 "$MNIST_DDP" $common --metrics "$TMP/$name.jsonl" "$@" 2>&1 | cat >"$TMP/$name.out" ||
    fail "run $name"
  grep -q '^summary:' "$TMP/$name.out" || { cat "$TMP/$name.out"; fail "run $name has no summary"; }
}
run epochs --epochs 3 --checkpoint-dir "$TMP/ck" --checkpoint-every 4
run capped --epochs 3 --max-steps 14
# Resumed at epoch 2's step 8 (global 18): its first progress line, at step 9, has one step's time behind it.
run part --epochs 3 --max-steps 18 --checkpoint-dir "$TMP/ck2" --checkpoint-every 9
run resumed --epochs 3 --checkpoint-dir "$TMP/ck2"
grep -q 'resumed from step 18' "$TMP/resumed.out" || { cat "$TMP/resumed.out"; fail "not resumed from step 18"; }

# check NAME EPOCHS MAX_STEPS: every progress line of NAME against the metrics and the expected steps left.
check() {
  "$PYTHON3" - "$TMP/$1.out" "$TMP/$1.jsonl" "$2" "$3" <<'PY'
import json, re, sys
out, jsonl, epochs, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(out, newline="").read()
if "\r" in text:
    sys.exit("a carriage return in the output through a pipe")
rows = [json.loads(l) for l in open(jsonl)]
steps = [r for r in rows if r["type"] == "step"]
summary = [r for r in rows if r["type"] == "summary"][-1]
pat = re.compile(r"^epoch (\d+) step (\d+)/(\d+) \((\d+\.\d)%\) loss \S+ lr \S+ images/s \d+ "
                 r"eta epoch (\d+):(\d\d) run (\d+):(\d\d)$")
lines = [l for l in text.splitlines() if re.match(r"^epoch \d+ step ", l)]
if len(lines) != len(steps) or not lines:
    sys.exit("%d progress lines, %d step lines in the metrics" % (len(lines), len(steps)))
def secs(m, s):
    return 60 * int(m) + int(s)
mean_step = summary["train_s"] / summary["steps"]
for line, row in zip(lines, steps):
    m = pat.match(line)
    if not m:
        sys.exit("progress line not in the documented format: " + line)
    epoch, step, n = int(m[1]), int(m[2]), int(m[3])
    if (epoch, step) != (row["epoch"], row["step"]):
        sys.exit("line %r against metrics %r" % (line, row))
    if m[4] != "%.1f" % (100.0 * step / n) or abs(row["epoch_fraction"] - step / n) > 1e-6:
        sys.exit("fraction of the epoch %s%% / %s, want %d/%d: %s" % (m[4], row["epoch_fraction"], step, n, line))
    left_run = (n - step) + (epochs - epoch) * n
    if max_steps:
        left_run = min(left_run, max_steps - row["global_step"])
    left_epoch = min(n - step, left_run)
    for key, left in (("eta_epoch_s", left_epoch), ("eta_run_s", left_run)):
        want = row["step_s"] * left
        if abs(row[key] - want) > 0.002 + 1e-3 * want:
            sys.exit("%s %.3f, want %d steps x %.4f s = %.3f: %s" % (key, row[key], left, row["step_s"], want, line))
    if secs(m[5], m[6]) != round(row["eta_epoch_s"]) or secs(m[7], m[8]) != round(row["eta_run_s"]):
        sys.exit("the line's ETA differs from the metrics' %.1f / %.1f s: %s" % (row["eta_epoch_s"], row["eta_run_s"], line))
    # The mean step time is the run's: between a fifth and five times the summary's training time per step.
    if not 0.2 * mean_step < row["step_s"] < 5 * mean_step:
        sys.exit("step time %.4f s against %.4f s per step in the summary: %s" % (row["step_s"], mean_step, line))
if steps[-1]["eta_run_s"] != 0 or not lines[-1].endswith("run 0:00"):
    sys.exit("the last progress line leaves time in the run: " + lines[-1])
if steps[0]["eta_run_s"] <= steps[0]["eta_epoch_s"] and summary["epochs"] > 1:
    sys.exit("the first line's run ETA is no longer than its epoch ETA: " + lines[0])
print("ok: %d progress lines, e.g. %s" % (len(lines), lines[1]))
PY
}
check epochs 3 0 || fail "progress lines of the 3-epoch run"
check capped 3 14 || fail "progress lines of the --max-steps 14 run"
check resumed 3 0 || fail "progress lines of the run resumed mid-epoch"
# Its first line's step time is that of the one step since the resume, not spread over the epoch's 9 steps.
"$PYTHON3" - "$TMP/resumed.jsonl" "$TMP/epochs.jsonl" <<'PY' || fail "the step time after a resume mid-epoch"
import json, statistics, sys
first = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"][0]
usual = statistics.median(r["step_s"] for r in map(json.loads, open(sys.argv[2])) if r["type"] == "step")
if (first["epoch"], first["step"]) != (2, 9) or first["step_s"] < 0.3 * usual:
    sys.exit("epoch %d step %d: step time %.4f s, the uninterrupted run's %.4f s" %
             (first["epoch"], first["step"], first["step_s"], usual))
print("ok: resumed at step 18, the first step time %.4f s (uninterrupted: %.4f s)" % (first["step_s"], usual))
PY

# The time line: every phase measured, and together no more than the wall time; checkpoints apart.
"$PYTHON3" - "$TMP/epochs.out" "$TMP/epochs.jsonl" <<'PY' || fail "the summary's time line"
import json, re, sys
text = open(sys.argv[1]).read()
s = [json.loads(l) for l in open(sys.argv[2]) if '"summary"' in l][-1]
m = re.search(r"^time: ([\d.]+) s wall: start-up ([\d.]+) s, data loading ([\d.]+) s, training ([\d.]+) s "
              r"\(communication exposed ([\d.]+) s\), evaluation ([\d.]+) s, checkpoints ([\d.]+) s, other (-?[\d.]+) s$",
              text, re.M)
if not m:
    sys.exit("no time line in the documented format")
keys = ("wall_s", "startup_s", "data_s", "train_s", "comm_exposed_s", "eval_s", "checkpoint_s")
for i, k in enumerate(keys):
    if abs(float(m[i + 1]) - s[k]) > 0.051:
        sys.exit("time line %s %s s, metrics %.3f" % (k, m[i + 1], s[k]))
parts = s["startup_s"] + s["data_s"] + s["train_s"] + s["eval_s"] + s["checkpoint_s"]
if min(s[k] for k in keys) <= 0 or s["comm_exposed_s"] > s["train_s"]:
    sys.exit("a phase without time, or more communication than training: %r" % s)
if parts > s["wall_s"] + 0.02 or parts < 0.8 * s["wall_s"]:
    sys.exit("the phases add up to %.3f s of %.3f s wall" % (parts, s["wall_s"]))
print("ok: " + m[0])
PY
grep '^time:' "$TMP/capped.out" | grep -q 'checkpoints 0.0 s' || fail "checkpoint time without checkpoints"

# A --metrics file that exists is replaced, neither added to nor overwritten in part: after a longer run and
# then an evaluation into one file, it holds the evaluation's lines alone (one run line, seed 4, one summary).
"$MNIST_DDP" --data "$TMP/small" --seed 3 --epochs 1 --max-steps 3 --log-interval 1 --metrics "$TMP/twice.jsonl" \
  >"$TMP/twice.out" 2>&1 || { cat "$TMP/twice.out"; fail "the first run into twice.jsonl"; }
"$MNIST_DDP" --data "$TMP/small" --seed 4 --epochs 0 --metrics "$TMP/twice.jsonl" >"$TMP/twice.out" 2>&1 ||
  { cat "$TMP/twice.out"; fail "the second run into twice.jsonl"; }
"$PYTHON3" - "$TMP/twice.jsonl" <<'PY' || fail "a second run's --metrics into the same file: not its lines alone"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
kinds = [r["type"] for r in rows]
if kinds.count("run") != 1 or kinds.count("summary") != 1 or "step" in kinds or rows[0]["settings"]["seed"] != "4":
    sys.exit("lines of %s: %r" % (sys.argv[1], kinds))
print("ok: a second run's metrics replace the first's: %r" % kinds)
PY

# A terminal: the progress line updates in place ("\r", erase to the line's end); the epoch line follows it.
command -v script >/dev/null || fail "script (util-linux) is needed for the terminal check"
# shellcheck disable=SC2086
timeout -k 5 300 script -qec "'$MNIST_DDP' $common --epochs 1" /dev/null >"$TMP/tty.out" 2>&1 || true
"$PYTHON3" - "$TMP/tty.out" <<'PY' || fail "progress on a terminal"
import sys
t = open(sys.argv[1], "rb").read()
if t.count(b"\repoch 1 step ") < 2 or b"\x1b[K" not in t or b"\x1b[K\r\nepoch 1: train loss" not in t:
    sys.exit("no updating progress line on a terminal: %r" % t[-600:])
print("ok: on a terminal the progress line updates in place")
PY
