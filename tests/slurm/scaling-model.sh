#!/bin/sh
# slurm/scaling-model (docs/scaling.md), no Slurm needed: its rows against the model's formulas computed here
# (a ring all-reduce of 4.8 MB across 2 nodes of 8 GPUs at 25 GB/s plus 50 us; the exposed part beyond the
# window; the batch multiple for 90%), --wire bf16 halving the bytes, --check's prediction from two --metrics
# files, and bad values refused.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
M=$abs_top_srcdir/slurm/scaling-model
"$PYTHON3" "$M" --step-us 100 --window 0.5 --busbw-net 25 --latency-net-us 50 >"$TMP/fp32" ||
  fail "scaling-model failed"
"$PYTHON3" "$M" --step-us 100 --window 0.5 --busbw-net 25 --latency-net-us 50 --wire bf16 >"$TMP/bf16" ||
  fail "scaling-model --wire bf16 failed"
# want WIRE_BYTES: the 2-node row as computed here
want() {
  awk -v s="$1" 'BEGIN { ar = 50 + s * 2 * 15 / 16 / 25e3; ex = ar - 50; step = 100 + ex
    k = ar / (100 * (0.1 / 0.9 + 0.5)); if (k < 1) k = 1
    printf "%5d %5d %14.1f %11.1f %8.1f %10.1f%% %16.2f\n", 2, 16, ar, ex, step, 100 * 100 / step, k }'
}
for w in fp32:4799528 bf16:2399764; do
  row=$(want "${w#*:}")
  grep -qxF "$row" "$TMP/${w%:*}" || { cat "$TMP/${w%:*}"; echo "expected: $row"; fail "${w%:*}: the 2-node row"; }
done
echo "ok: the 2-node rows follow the ring formula, the window and the 90% batch rule (fp32 and bf16)"

echo '{"type":"summary","world":1,"images_per_s":1000}' >"$TMP/one.json"
echo '{"type":"summary","world":2,"images_per_s":1800,"allreduce_blocking_ms":10,"allreduce_exposed_ms":6.4}' \
  >"$TMP/two.json"
"$PYTHON3" "$M" --check "$TMP/one.json" "$TMP/two.json" --window 0.1 >"$TMP/check" || fail "--check failed"
# 64 images at 1000 images/s: 64 ms a step. Isolated: 10 - 0.1 x 64 = 3.6 ms exposed, 2 x 1000 x 64 / 67.6 =
# 1893 (1800 is 95% of it); the run's own 6.4 ms: 2 x 1000 x 64 / 70.4 = 1818 (99%).
grep -q '^from the isolated all-reduce and --window 0.1: predicted 1893 images/s, efficiency 95%; measured 95% of it' \
  "$TMP/check" || { cat "$TMP/check"; fail "--check: not the isolated prediction computed here"; }
grep -q '^from the exposed time: predicted 1818 images/s, efficiency 91%; measured 99% of it' "$TMP/check" ||
  { cat "$TMP/check"; fail "--check: not the exposed-time prediction computed here"; }
echo "ok: --check predicts 1893 and 1818 images/s from 1000 on one rank, the isolated and the exposed all-reduce"

expect_fail 2 'window must be within' "$PYTHON3" "$M" --window 2
expect_fail 1 'wants a 1-rank run first' "$PYTHON3" "$M" --check "$TMP/two.json" "$TMP/one.json"
