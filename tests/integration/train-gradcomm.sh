#!/bin/sh
# --grad-comm bf16 in the trainer (the exchange's arithmetic is tested in mpi_comm): on 2 ranks it changes the
# trajectory (other parameter bits) but only by rounding: SGD's first 10 losses within 1e-3 relative of the
# fp32 exchange's, each 50-step mean within 5% (measured: 7e-5 and 1.3%; later single steps differ more, as any
# perturbation grows), the replicas identical at the end (the trainer stops with 70 otherwise); on 1 rank
# nothing is exchanged, so the result is fp32's bit for bit, unless MNIST_DDP_ARM_ALONE=1 arms the exchange
# anyway (fp32: unchanged; bf16: rounded); the all-reduce line names the format and half the bytes; a checkpoint
# of an fp32 exchange is refused for a bf16 one (65), as any setting of the trajectory; the communication proxy
# (GPU only) is refused on the CPU path and when malformed (78); the sums in shared memory (below), and their
# report of the wait for a rank held back (MNIST_DDP_STRAGGLER), refused when malformed (78).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
run="--data $MNIST_DATA --epochs 1 --threads 1 --seed 3 --log-interval 1 --optimizer sgd --lr 0.05"
for w in fp32 bf16; do
  # shellcheck disable=SC2086
  run_np 2 "$MNIST_DDP" $run --max-steps 200 --grad-comm $w --metrics "$TMP/$w.json" >"$TMP/$w.out" 2>"$TMP/$w.err" ||
    { cat "$TMP/$w.out" "$TMP/$w.err"; fail "--grad-comm $w on 2 ranks"; }
done
grep -q '^all-reduce: .* blocking for 2\.4 MB (bf16), ' "$TMP/bf16.out" || { cat "$TMP/bf16.out"; fail "no bf16 all-reduce line"; }
grep -q '^all-reduce: .* blocking for 4\.8 MB (fp32 in shared memory), ' "$TMP/fp32.out" ||
  { cat "$TMP/fp32.out"; fail "no fp32 all-reduce line"; }
"$PYTHON3" - "$TMP/fp32.json" "$TMP/bf16.json" <<'PY' || fail "bf16 exchange: trajectory not as expected"
import json, sys
def rows(p): return [json.loads(l) for l in open(p) if l.strip()]
a, b = (rows(p) for p in sys.argv[1:3])
la, lb = ([r["loss"] for r in rs if r["type"] == "step"] for rs in (a, b))
assert len(la) == len(lb) == 200, (len(la), len(lb))
first = max(abs(x - y) / x for x, y in zip(la[:10], lb[:10]))
assert first <= 1e-3, f"first 10 steps differ by {first:.2e} relative"
for w in range(0, 200, 50):
    ma, mb = sum(la[w:w + 50]) / 50, sum(lb[w:w + 50]) / 50
    assert abs(ma - mb) <= 0.05 * ma, f"steps {w}-{w + 49}: mean loss {ma:.4f} (fp32), {mb:.4f} (bf16)"
fa, fb = ([r for r in rs if r["type"] == "summary"][-1]["fingerprint"] for rs in (a, b))
assert fa != fb, "bf16 and fp32 exchanges end with the same parameters: the option did nothing"
print(f"ok: bf16 exchange: first 10 losses within {first:.1e} relative, 50-step means within 5%, parameters differ")
PY

# --grad-shm (on by default, one node): the ranks sum each other's gradients in shared memory. With 2 ranks
# a + b is MPI's sum: MPI's all-reduce (--grad-shm off) ends with the same parameters bit for bit. With 3 ranks
# the additions go in another order than MPI's: the losses follow MPI's as the bf16 exchange's do above (measured:
# the first 10 identical), and the trainer's check of the replicas passes.
for np in 2 3; do
  # shellcheck disable=SC2086
  run_np $np "$MNIST_DDP" $run --max-steps $((np == 2 ? 200 : 100)) --grad-shm off --metrics "$TMP/mpi$np.json" >"$TMP/mpi.out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "--grad-shm off on $np ranks"; }
  grep -q '^all-reduce: .* blocking for 4\.8 MB (fp32), ' "$TMP/mpi.out" || { cat "$TMP/mpi.out"; fail "--grad-shm off: no MPI all-reduce line"; }
done
[ "$(json_field "$TMP/mpi2.json" summary fingerprint)" = "$(json_field "$TMP/fp32.json" summary fingerprint)" ] ||
  fail "2 ranks: the sums in shared memory and MPI's all-reduce end with different parameters"
# shellcheck disable=SC2086
run_np 3 "$MNIST_DDP" $run --max-steps 100 --metrics "$TMP/shm3.json" >"$TMP/shm.out" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "shared-memory sums on 3 ranks"; }
grep -q '^all-reduce: .* (fp32 in shared memory), ' "$TMP/shm.out" || { cat "$TMP/shm.out"; fail "3 ranks: not in shared memory"; }
"$PYTHON3" - "$TMP/mpi3.json" "$TMP/shm3.json" <<'PY' || fail "3 ranks: shared-memory sums off MPI's trajectory"
import json, sys
def losses(p): return [r["loss"] for r in (json.loads(l) for l in open(p) if l.strip()) if r["type"] == "step"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 100, (len(a), len(b))
first = max(abs(x - y) / x for x, y in zip(a[:10], b[:10]))
assert first <= 1e-3, f"first 10 steps differ by {first:.2e} relative"
for w in range(0, 100, 50):
    ma, mb = sum(a[w:w + 50]) / 50, sum(b[w:w + 50]) / 50
    assert abs(ma - mb) <= 0.05 * ma, f"steps {w}-{w + 49}: mean loss {ma:.4f} (MPI), {mb:.4f} (shared memory)"
print(f"ok: 3 ranks: shared-memory sums follow MPI's, first 10 losses within {first:.1e} relative")
PY
# A rank held back (MNIST_DDP_STRAGGLER: rank 1 sleeps 3 s before step 101, outside every collective; the
# progress lines' sums are every 50 steps): rank 0 waits for it at the end of its backward, and its all-reduce
# line counts that wait apart from the exchange (at least 2.5 s of its exposed time, over the run's steps; the
# ranks' own skew on this 2-core VM was 0.8-1.2 s over 300 steps, so 150 here).
export MNIST_DDP_STRAGGLER=1:101:3
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $run --max-steps 150 --log-interval 50 --metrics "$TMP/late.json" >"$TMP/late.out" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "a rank held back for 3 s ended the run"; }
grep -q '^all-reduce: .* exposed per step in [0-9]* buckets, [0-9.]* ms of it waiting for the last rank.s backward: ' \
  "$TMP/late.out" || { cat "$TMP/late.out"; fail "held-back rank: no wait for the last rank in the all-reduce line"; }
"$PYTHON3" - "$TMP/late.json" <<'PY' || fail "held-back rank: the wait for it not counted apart"
import json, sys
s = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip()) if r["type"] == "summary"][-1]
waited = s["allreduce_skew_ms"] * s["steps"] / 1e3
assert 2.5 <= waited and s["allreduce_skew_ms"] <= s["allreduce_exposed_ms"], s
print(f"ok: a rank held back 3 s: rank 0 waited {waited:.2f} s for it, apart from the exchange")
PY
# Malformed, on every rank: 78 with one line naming the variable.
for v in 1:0:2 1:5 x:1:1 1:1:0 1:1:2s; do
  MNIST_DDP_STRAGGLER=$v
  expect_fail 78 "environment variable MNIST_DDP_STRAGGLER='$v': RANK:STEP:SECONDS expected" \
    run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
done
unset MNIST_DDP_STRAGGLER
# The same with Adadelta, and SGD with momentum and weight decay.
for opt in "--optimizer adadelta --lr 1" "--optimizer sgd --lr 0.05 --momentum 0.9 --weight-decay 1e-4"; do
  for shm in on off; do
    # shellcheck disable=SC2086
    run_np 2 "$MNIST_DDP" $run --max-steps 30 $opt --grad-shm $shm --metrics "$TMP/opt-$shm.json" >/dev/null 2>"$TMP/err" ||
      { cat "$TMP/err"; fail "$opt --grad-shm $shm"; }
  done
  [ "$(json_field "$TMP/opt-on.json" summary fingerprint)" = "$(json_field "$TMP/opt-off.json" summary fingerprint)" ] ||
    fail "$opt: the sums in shared memory and MPI's all-reduce end with different parameters"
done
echo "ok: 2 ranks: shared-memory sums and MPI's all-reduce end with the same parameters (SGD, Adadelta, momentum)"
# A /dev/shm too small for the segments (a private 8 MiB one, Open MPI's own segments moved to /tmp: one rank's
# 4.6 MiB fit, the other's do not): one warning, MPI's all-reduce, the same parameters, nothing left in /dev/shm
# (the rank that made its segment removes it).
if unshare -m true 2>/dev/null; then
  # shellcheck disable=SC2016,SC2086
  OMPI_MCA_btl_vader_backing_directory=$TMP unshare -m sh -c \
    'left=$1; shift; mount -t tmpfs -o size=8m tmpfs /dev/shm || exit; "$@"; rc=$?; ls -A /dev/shm >"$left"; exit $rc' \
    sh "$TMP/left" \
    timeout -k 10 600 "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$MNIST_DDP" $run --max-steps 200 \
    --metrics "$TMP/full.json" >"$TMP/full.out" 2>"$TMP/err" || { cat "$TMP/err"; fail "a full /dev/shm ended the run"; }
  n=$(grep -c 'warning: gradient all-reduce through shared memory: creating a segment failed (No space left on device, rank [01]; 4\.6 MiB per rank in /dev/shm): MPI.s all-reduce instead' "$TMP/err" || true)
  [ "$n" -eq 1 ] || { cat "$TMP/err"; fail "a full /dev/shm: $n warnings, expected 1"; }
  grep -q '^all-reduce: .* (fp32), ' "$TMP/full.out" || { cat "$TMP/full.out"; fail "a full /dev/shm: no MPI all-reduce"; }
  [ ! -s "$TMP/left" ] || fail "a full /dev/shm: left behind in it: $(cat "$TMP/left")"
  [ "$(json_field "$TMP/full.json" summary fingerprint)" = "$(json_field "$TMP/fp32.json" summary fingerprint)" ] ||
    fail "a full /dev/shm: other parameters"
  echo "ok: a full /dev/shm: $(grep -o 'creating a segment failed.*instead' "$TMP/err")"
else
  echo "skip: a full /dev/shm: no mount namespace here (unshare -m needs root)"
fi

# One rank: nothing to exchange.
for w in fp32 bf16; do
  # shellcheck disable=SC2086
  run_np 1 "$MNIST_DDP" $run --max-steps 20 --grad-comm $w --metrics "$TMP/one-$w.json" >/dev/null 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "--grad-comm $w on 1 rank"; }
done
one=$(json_field "$TMP/one-fp32.json" summary fingerprint)
[ "$one" = "$(json_field "$TMP/one-bf16.json" summary fingerprint)" ] || fail "1 rank: --grad-comm bf16 changed the result"
echo "ok: 1 rank: the same parameters with either format"
# MNIST_DDP_ARM_ALONE=1: one rank exchanges as with peers: in fp32 a sum over one rank changes nothing, in bf16
# the rounding shows; both report their all-reduce.
for w in fp32 bf16; do
  # shellcheck disable=SC2086
  (export MNIST_DDP_ARM_ALONE=1; run_np 1 "$MNIST_DDP" $run --max-steps 20 --grad-comm $w --metrics "$TMP/alone-$w.json") \
    >"$TMP/alone-$w.out" 2>"$TMP/err" || { cat "$TMP/err"; fail "--grad-comm $w on 1 rank armed alone"; }
  grep -q "^all-reduce: .* MB ($w), .* exposed per step in 2 buckets: " "$TMP/alone-$w.out" ||
    { cat "$TMP/alone-$w.out"; fail "armed alone, $w: no all-reduce line"; }
done
[ "$(json_field "$TMP/alone-fp32.json" summary fingerprint)" = "$one" ] || fail "armed alone, fp32: parameters changed"
[ "$(json_field "$TMP/alone-bf16.json" summary fingerprint)" != "$one" ] ||
  fail "armed alone, bf16: the same parameters as fp32 (no rounding went through the exchange)"
echo "ok: 1 rank armed alone: fp32 unchanged, bf16 rounded, both reporting their all-reduce"

# A checkpoint's exchange format is part of its trajectory.
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $run --max-steps 4 --checkpoint-dir "$TMP/ckpt" --checkpoint-every 2 >/dev/null 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "checkpointed fp32 run"; }
# shellcheck disable=SC2086
expect_fail 65 'it was written with grad_comm fp32, this run has grad_comm bf16' \
  run_np 2 "$MNIST_DDP" $run --max-steps 6 --checkpoint-dir "$TMP/ckpt" --grad-comm bf16

# MNIST_DDP_COMM_PROXY stands in for other GPUs' traffic: a malformed value, or the CPU path, ends the run (78).
# shellcheck disable=SC2086
(export MNIST_DDP_ARM_ALONE=1 MNIST_DDP_COMM_PROXY=370:1
  expect_fail 78 "variable MNIST_DDP_COMM_PROXY='370:1': the rank count after ':' must be an integer from 2" \
    run_np 1 "$MNIST_DDP" $run --max-steps 2)
# shellcheck disable=SC2086
(export MNIST_DDP_ARM_ALONE=1 MNIST_DDP_COMM_PROXY=370
  expect_fail 78 "MNIST_DDP_COMM_PROXY='370' stands in for other GPUs' traffic: it needs the GPU path, one rank" \
    run_np 1 "$MNIST_DDP" $run --max-steps 2)
