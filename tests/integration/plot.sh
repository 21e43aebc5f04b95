#!/bin/sh
# mnist_ddp-plot on real --metrics files: the tables it plots are the files' epoch lines (training loss,
# test loss, accuracy in %) and step lines (time, step, images/s, loss); the PNG has the asked size; several
# files make one plot with one line per file per panel, a sweep's files labelled with their row.tsv; without
# gnuplot it says so and exits 69 (and 64, 65, 66 for usage, a file that is not metrics, a missing file).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
plot=$abs_top_builddir/tools/mnist_ddp-plot
[ -x "$plot" ] || fail "no $plot: build first (make)"
command -v gnuplot >/dev/null || fail "gnuplot is needed (apt-get install gnuplot-nox; .ci/install-deps)"
small_mnist "$TMP/small" 640 100
# A sweep's layout (run-array.sbatch): task-N/metrics.jsonl beside task-N/row.tsv.
for t in 0 1; do
  mkdir -p "$TMP/runs/task-$t"
  printf 'seed\tlr\n%s\t%s\n' $((t + 1)) "0.$((t + 5))" >"$TMP/runs/task-$t/row.tsv"
  run_np 2 "$MNIST_DDP" --data "$TMP/small" --epochs 2 --log-interval 2 --seed $((t + 1)) --lr "0.$((t + 5))" \
    --metrics "$TMP/runs/task-$t/metrics.jsonl" >"$TMP/run$t.log" 2>&1 || { cat "$TMP/run$t.log"; fail "training run $t"; }
done

"$plot" --size 800,600 --tables "$TMP/one" -o "$TMP/one.png" "$TMP/runs/task-0/metrics.jsonl" >"$TMP/one.out" 2>&1 ||
  { cat "$TMP/one.out"; fail "mnist_ddp-plot on one file"; }
"$plot" --tables "$TMP/two" -o "$TMP/two.png" "$TMP/runs/task-0/metrics.jsonl" "$TMP/runs/task-1/metrics.jsonl" \
  >"$TMP/two.out" 2>&1 || { cat "$TMP/two.out"; fail "mnist_ddp-plot on two files"; }
cat "$TMP/one.out" "$TMP/two.out"

"$PYTHON3" - "$TMP" <<'PY' || fail "the plotted tables or the PNG"
import json, os, struct, sys
tmp = sys.argv[1]
def png_size(path):
    head = open(path, "rb").read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        sys.exit("%s is not a PNG" % path)
    return struct.unpack(">II", head[16:24])
if png_size(tmp + "/one.png") != (800, 600) or png_size(tmp + "/two.png") != (1200, 900):
    sys.exit("PNG sizes %r %r, want 800x600 and the default 1200x900" % (png_size(tmp + "/one.png"), png_size(tmp + "/two.png")))
def table(path):
    return [[float(x) for x in l.split()] for l in open(path)]
def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 * max(1, abs(y)) for x, y in zip(a, b))
for d, n in (("one", 1), ("two", 2)):
    for i in range(1, n + 1):
        rows = [json.loads(l) for l in open("%s/runs/task-%d/metrics.jsonl" % (tmp, i - 1))]
        epochs = [[r["epoch"], r["train_loss"], r["test_loss"], 100 * r["test_accuracy"]] for r in rows if r["type"] == "epoch"]
        steps = [[r["time_s"], r["global_step"], r["images_per_s"], r["loss"]] for r in rows if r["type"] == "step"]
        got_e, got_s = table("%s/%s/%d.epoch" % (tmp, d, i)), table("%s/%s/%d.step" % (tmp, d, i))
        if len(epochs) != 2 or len(got_e) != len(epochs) or not all(close(a, b) for a, b in zip(got_e, epochs)):
            sys.exit("%s/%d.epoch %r, the metrics' epoch lines %r" % (d, i, got_e, epochs))
        if len(steps) < 2 or len(got_s) != len(steps) or not all(close(a, b) for a, b in zip(got_s, steps)):
            sys.exit("%s/%d.step %r, the metrics' step lines %r" % (d, i, got_s, steps))
gp = open(tmp + "/two/plot.gp").read()
labels = [open("%s/two/%d.label" % (tmp, i)).read().strip() for i in (1, 2)]
if labels != ["task-0: seed 1, lr 0.5", "task-1: seed 2, lr 0.6"]:
    sys.exit("sweep labels %r" % labels)
plots = [l for l in gp.splitlines() if l.startswith("plot ")]
if len(plots) != 4 or any(l.count("/1.") < 1 or l.count("/2.") < 1 for l in plots):
    sys.exit("want 4 panels, each with both files:\n" + "\n".join(plots))
print("ok: tables match the metrics; PNG sizes; 4 panels with labels %r" % labels)
PY

# Synthetic metrics (no training): N epochs of one epoch line and one step line each; OLD=1 leaves time_s out of
# the step lines, as files written before the step lines had it.
synth() { # synth FILE EPOCHS [OLD]
  "$PYTHON3" - "$@" <<'PY'
import sys
path, epochs, old = sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3
with open(path, "w") as f:
    for e in range(1, epochs + 1):
        t = "" if old else ',"time_s":%d.5' % (10 * e)
        f.write('{"type":"step","epoch":%d,"step":5,"global_step":%d,"loss":0.%d,"lr":1,"images_per_s":100%s}\n'
                % (e, 5 * e, e, t))
        f.write('{"type":"epoch","epoch":%d,"train_loss":0.%d,"test_loss":0.%d,"test_accuracy":0.9}\n' % (e, e, e))
PY
}
# Up to 20 epochs one x tic per epoch, from 21 on gnuplot's own (19, 20 and 21: the threshold's three sides).
for e in 19 20 21; do
  synth "$TMP/e$e.jsonl" "$e"
  "$plot" --tables "$TMP/t$e" -o "$TMP/e$e.png" "$TMP/e$e.jsonl" >"$TMP/e$e.out" 2>&1 || { cat "$TMP/e$e.out"; fail "plot of $e epochs"; }
  [ "$(cat "$TMP/e$e.out")" = "mnist_ddp-plot: $TMP/e$e.png: 1 run, $e epochs" ] || fail "plot of $e epochs said: $(cat "$TMP/e$e.out")"
  tics=$(grep -c '^set xtics 1$' "$TMP/t$e/plot.gp" || true)
  [ "$tics" = "$([ "$e" -le 20 ] && echo 1 || echo 0)" ] || fail "$e epochs: 'set xtics 1' $tics times in plot.gp"
done
# A file from before time_s: its steps are plotted against the optimizer step, and the axis says so.
synth "$TMP/old.jsonl" 2 old
"$plot" --tables "$TMP/told" -o "$TMP/old.png" "$TMP/old.jsonl" >"$TMP/old.out" 2>&1 || { cat "$TMP/old.out"; fail "plot of an old file"; }
[ "$(cat "$TMP/told/1.step")" = "$(printf '5 5 100 0.1\n10 10 100 0.2')" ] || fail "old file's step table: $(cat "$TMP/told/1.step")"
grep -q "^set title 'throughput'; set xlabel 'optimizer step (no time_s in the metrics)';" "$TMP/told/plot.gp" ||
  fail "old file: the time axis is not named the optimizer step: $(grep xlabel "$TMP/told/plot.gp")"
grep -q "set xlabel 'time since the start (s)'" "$TMP/t19/plot.gp" || fail "a file with time_s plotted against the step"
# Without -o: METRICS.png for one file, comparison.png for several, in the working directory; the scratch
# directory (TMPDIR) left empty after each success.
mkdir "$TMP/cwd" "$TMP/scratch"
synth "$TMP/fresh.jsonl" 3
(cd "$TMP/cwd" && TMPDIR="$TMP/scratch" "$plot" "$TMP/fresh.jsonl" >/dev/null && TMPDIR="$TMP/scratch" "$plot" \
  "$TMP/e19.jsonl" "$TMP/e20.jsonl" >"$TMP/cmp.out") || fail "plots without -o"
if [ ! -s "$TMP/fresh.png" ] || [ ! -s "$TMP/cwd/comparison.png" ]; then
  fail "without -o: want fresh.png beside its file and comparison.png here: $(find "$TMP" -name '*.png' | tr '\n' ' ')"
fi
[ "$(cat "$TMP/cmp.out")" = "mnist_ddp-plot: comparison.png: 2 runs, 20 epochs" ] || fail "comparison said: $(cat "$TMP/cmp.out")"
[ -z "$(ls -A "$TMP/scratch")" ] || fail "left in TMPDIR after success: $(ls -A "$TMP/scratch")"
echo "ok: x tics at 19, 20 and 21 epochs; a file without time_s; default output names; nothing left in TMPDIR"

# Without gnuplot: a message that says what to install, exit 69, no PNG.
expect_fail 69 'gnuplot not found.*apt-get install gnuplot-nox' \
  env GNUPLOT="$TMP/no-gnuplot" "$plot" -o "$TMP/none.png" "$TMP/runs/task-0/metrics.jsonl"
[ ! -e "$TMP/none.png" ] || fail "a PNG without gnuplot"
expect_fail 64 'no metrics file' "$plot"
expect_fail 64 "unknown option '--bogus'" "$plot" --bogus x.jsonl
expect_fail 64 'want W,H' "$plot" --size 800x600 "$TMP/runs/task-0/metrics.jsonl"
expect_fail 66 'cannot read the metrics file' "$plot" "$TMP/missing.jsonl"
expect_fail 65 'no epoch or step lines' "$plot" "$TMP/runs/task-0/row.tsv"
