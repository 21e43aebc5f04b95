#!/bin/sh
# Checkpoints and model files written by earlier versions (tests/fixtures; its README.md says which commit
# wrote each file and how): a requeued job that finds one after an upgrade resumes it from its step, a setting
# newer than the file read as its documented default (grad_comm fp32: a bf16 run is refused naming both
# values); the unsealed format of the first checkpoints is refused as a format (65), never as damage; a byte
# flipped in a tensor is still refused as damaged, by the seal and, under a valid seal, by the file's own
# digest; model files of both formats load.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
fx=$abs_top_srcdir/tests/fixtures
# The fixtures' run: convnet, SGD with momentum 0.5, 2 ranks x 100 (lr 2e-4), seed 1, the full training set,
# stopped after step 3 of 300. One process takes them with the same global batch and lr.
common="--data $MNIST_DATA --model convnet --momentum 0.5 --epochs 1 --log-interval 100"
once="timeout -k 5 60 $MNIST_DDP --batch-size 200 --lr 0.0002"
ckpt() { printf '%s/ckpt-%012d.h5' "$1" "$2"; }
resumable="249fecd-checkpoint_format f745d2a-no-grad_comm 5036e7d-grad_comm"

# Each sealed format, found in the checkpoint directory as a requeued job finds it: resumed from step 3,
# then steps 4 and 5 and the checkpoint where the run stops.
for v in $resumable; do
  mkdir "$TMP/$v" && cp "$fx/ckpt-$v.h5" "$(ckpt "$TMP/$v" 3)"
  # shellcheck disable=SC2086
  run_np 2 "$MNIST_DDP" $common --max-steps 5 --checkpoint-dir "$TMP/$v" >"$TMP/$v.log" 2>&1 ||
    { cat "$TMP/$v.log"; fail "ckpt-$v.h5 does not resume"; }
  for line in "resumed from step 3 (restart 1): $(ckpt "$TMP/$v" 3), epoch 1 after 3 of its steps" \
    "checkpoint: step 5 (epoch 1, step 5 of it) written to $(ckpt "$TMP/$v" 5)"; do
    grep -q -F "$line" "$TMP/$v.log" || { cat "$TMP/$v.log"; fail "ckpt-$v.h5: the run does not say '$line'"; }
  done
  echo "ok: ckpt-$v.h5 resumed from step 3 and went on to step 5"
done
# SGD without momentum keeps no optimizer state: its checkpoint resumes as it was written.
mkdir "$TMP/sgd0" && cp "$fx/ckpt-b649878-sgd-no-momentum.h5" "$(ckpt "$TMP/sgd0" 3)"
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $(echo "$common" | sed 's/--momentum 0.5/--momentum 0/') --max-steps 5 --checkpoint-dir "$TMP/sgd0" \
  >"$TMP/sgd0.log" 2>&1 || { cat "$TMP/sgd0.log"; fail "ckpt-b649878-sgd-no-momentum.h5 does not resume"; }
grep -q -F "resumed from step 3 (restart 1): $(ckpt "$TMP/sgd0" 3)" "$TMP/sgd0.log" ||
  { cat "$TMP/sgd0.log"; fail "ckpt-b649878-sgd-no-momentum.h5 was not resumed"; }
echo "ok: ckpt-b649878-sgd-no-momentum.h5 (SGD, no optimizer state) resumed from step 3"
# A file without grad_comm was written with the fp32 exchange.
# shellcheck disable=SC2086
expect_fail 65 "written with grad_comm fp32, this run has grad_comm bf16" $once $common --grad-comm bf16 \
  --resume "$fx/ckpt-f745d2a-no-grad_comm.h5"

# The unsealed format: refused naming it, with --resume FILE and in a checkpoint directory (not skipped as corrupt).
unsealed="no mnist_ddp checksum header: checkpoint format 'mnist_ddp train_state 1' unsealed"
# shellcheck disable=SC2086
expect_fail 65 "--resume $fx/ckpt-f80537a-unsealed.h5: $unsealed" $once $common --resume "$fx/ckpt-f80537a-unsealed.h5"
mkdir "$TMP/unsealed" && cp "$fx/ckpt-f80537a-unsealed.h5" "$(ckpt "$TMP/unsealed" 3)"
# shellcheck disable=SC2086
RUN_TIMEOUT=60 expect_fail 65 "--checkpoint-dir $TMP/unsealed: $(ckpt "$TMP/unsealed" 3): $unsealed" \
  run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/unsealed"
# The whole line: a format this version does not resume, without the hint another run's checkpoint gets.
line=$(grep 'error:' "$TMP/err")
case $line in
  "mnist_ddp: error: --checkpoint-dir $TMP/unsealed: $(ckpt "$TMP/unsealed" 3): $unsealed, as mnist_ddp wrote it before seal format 1 (or a file rewritten by another tool); this version resumes sealed checkpoints only (use another --checkpoint-dir, or --resume never) [rank 0/2 on "*) ;;
  *) fail "the unsealed checkpoint in a directory: $line (not another run's, a format this version does not resume)" ;;
esac
! grep -q -i "corrupt\|checksum mismatch" "$TMP/err" || { cat "$TMP/err"; fail "the unsealed format called damaged"; }

# flip SRC OUT RESEAL: OUT is SRC with one byte of fc.weight's data flipped; RESEAL=1: its seal made valid again,
# so only the checkpoint's own digest can tell.
flip() {
  "$PYTHON3" - "$@" <<'PY'
import hashlib, shutil, sys, h5py
src, out, reseal = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
with h5py.File(src, "r") as f:
    d = f["fc.weight"]
    pos = d.id.get_offset() + d.nbytes // 2
data = bytearray(open(src, "rb").read())
data[pos] ^= 0x10
if reseal:
    body = bytes(data[512:])
    seal = b"mnist_ddp sealed file 1\nsha256 %s\nbytes %d\n" % (hashlib.sha256(body).hexdigest().encode(), len(body))
    data = bytearray(seal.ljust(512, b"\0") + body)
open(out, "wb").write(data)
PY
}
for v in $resumable; do
  flip "$fx/ckpt-$v.h5" "$TMP/flipped.h5" 0
  # shellcheck disable=SC2086
  expect_fail 65 "--resume $TMP/flipped.h5: checksum mismatch: its header says" $once $common --resume "$TMP/flipped.h5"
  flip "$fx/ckpt-$v.h5" "$TMP/resealed.h5" 1
  # shellcheck disable=SC2086
  expect_fail 65 "--resume $TMP/resealed.h5: checksum mismatch: the file says" $once $common \
    --resume "$TMP/resealed.h5"
done

# Model files, unsealed (loaded with a warning) and sealed.
for v in f80537a-unsealed 5036e7d-sealed; do
  # shellcheck disable=SC2086
  $once $common --epochs 0 --load-model "$fx/model-$v.h5" >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/out" "$TMP/err"; fail "model-$v.h5 does not load"; }
  grep -q "^evaluation: test loss" "$TMP/out" || { cat "$TMP/out"; fail "model-$v.h5: no evaluation"; }
  case $v in *-unsealed) want=1 ;; *) want=0 ;; esac
  [ "$(grep -c "model-$v.h5: no mnist_ddp checksum header" "$TMP/err")" = "$want" ] ||
    { cat "$TMP/err"; fail "model-$v.h5: not $want warning(s) about its seal"; }
done
echo "ok: model files of both formats load"
