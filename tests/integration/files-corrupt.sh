#!/bin/sh
# Model files and checkpoints written by mnist_ddp are checked against their seal before HDF5 parses
# them: every damaged copy of a saved model (--load-model) and of a checkpoint (--resume FILE) -- a bit
# flipped in the seal, the HDF5 superblock and metadata, the data or the last byte, truncations, zeroed
# runs, an in-place edit by h5py -- ends with exit 65 and one error line naming the file, within a time
# limit (no signal, no hang); so do files resealed after a change to the last character of their digest or
# format attribute (the loaders compare whole values). --resume auto skips a damaged newest checkpoint for
# the previous valid one with a warning, and stops with 65 when none is valid.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/small" 200 50
common="--data $TMP/small --batch-size 10 --epochs 1"
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $common --save-model "$TMP/m.h5" --checkpoint-dir "$TMP/ck" --checkpoint-every 5 \
  >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "the run that writes the files"; }
ckpt() { printf '%s/ckpt-%012d.h5' "$1" "$2"; }

# damage FILE OUT CASE: OUT is FILE damaged as CASE says (flip@OFFSET, zero@OFFSET, cut@LENGTH, h5edit;
# OFFSET and LENGTH may be "end-N" or "half").
damage() {
  "$PYTHON3" - "$@" <<'PY'
import shutil, sys
src, out, case = sys.argv[1:4]
shutil.copy(src, out)
size = len(open(src, "rb").read())
kind, _, where = case.partition("@")
pos = size // 2 if where == "half" else size - int(where[4:]) if where.startswith("end-") else int(where or 0)
if kind == "h5edit":
    import h5py
    with h5py.File(out, "a") as f:  # a legitimate-looking edit in place: the seal no longer matches
        f.attrs["note"] = "edited"
else:
    with open(out, "r+b") as f:
        if kind == "cut":
            f.truncate(pos)
        else:
            f.seek(pos)
            b = f.read(256 if kind == "zero" else 1)
            f.seek(pos)
            f.write(bytes(len(b)) if kind == "zero" else bytes([b[0] ^ 0x10]))
PY
}

# Offsets: the seal's magic, digest and padding; HDF5's signature, superblock, root group and object
# headers (the metadata the HDF5 library cannot be trusted to survive); the middle; the last byte.
cases="flip@0 flip@30 flip@100 flip@511 flip@512 flip@520 flip@700 flip@1200 flip@2500 flip@4000 flip@half
flip@end-1 zero@512 zero@1024 zero@half cut@0 cut@200 cut@512 cut@3000 cut@half cut@end-1 h5edit"
one_line() { # one_line FILE: exactly one error line, and it names FILE
  [ "$(grep -c 'error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err" >&2; fail "not exactly one error line"; }
  grep 'error:' "$TMP/err" | grep -q -F "$1" || { cat "$TMP/err" >&2; fail "the error line does not name $1"; }
}
# One process (an MPI singleton: quicker than mpirun), killed if it hangs (exit 124, not 65).
once="timeout -k 5 60 $MNIST_DDP"
n=0
for c in $cases; do
  damage "$TMP/m.h5" "$TMP/bad.h5" "$c"
  # shellcheck disable=SC2086
  expect_fail 65 "--load-model $TMP/bad.h5: " $once $common --epochs 0 --load-model "$TMP/bad.h5" >/dev/null
  one_line "$TMP/bad.h5"
  damage "$(ckpt "$TMP/ck" 10)" "$TMP/bad-ckpt.h5" "$c"
  # shellcheck disable=SC2086
  expect_fail 65 "--resume $TMP/bad-ckpt.h5: " $once $common --batch-size 20 --resume "$TMP/bad-ckpt.h5" >/dev/null
  one_line "$TMP/bad-ckpt.h5"
  n=$((n + 2))
done
echo "ok: $n damaged copies refused with 65 and one line"
# Every rank ends with the same code and the job with one line, on 2 ranks as well.
damage "$TMP/m.h5" "$TMP/bad.h5" flip@half
# shellcheck disable=SC2086
RUN_TIMEOUT=60 expect_fail 65 "--load-model $TMP/bad.h5: checksum mismatch" run_np 2 "$MNIST_DDP" $common \
  --epochs 0 --load-model "$TMP/bad.h5"
one_line "$TMP/bad.h5"
! grep -q "MPI_ABORT" "$TMP/err" || fail "the ranks were aborted instead of all stopping with 65"
# A checkpoint rewritten by h5py (no seal) is not one of ours: refused (a model file is loaded, with a warning).
"$PYTHON3" - "$(ckpt "$TMP/ck" 10)" "$TMP/unsealed.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    for k in src:
        src.copy(k, dst)
    dst.attrs.update(src.attrs)
PY
# shellcheck disable=SC2086
expect_fail 65 "--resume $TMP/unsealed.h5: no mnist_ddp checksum header" $once $common --batch-size 20 \
  --resume "$TMP/unsealed.h5"
one_line "$TMP/unsealed.h5"
# A tensor edited and the file resealed (the seal holds): the checkpoint's own digest over its content,
# position and settings still refuses it.
"$PYTHON3" - "$(ckpt "$TMP/ck" 10)" "$TMP/resealed.h5" <<'PY'
import hashlib, shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "a") as f:
    f["fc2.bias"][0] += 1.0
body = open(sys.argv[2], "rb").read()[512:]
seal = b"mnist_ddp sealed file 1\nsha256 %s\nbytes %d\n" % (hashlib.sha256(body).hexdigest().encode(), len(body))
open(sys.argv[2], "wb").write(seal.ljust(512, b"\0") + body)
PY
# shellcheck disable=SC2086
expect_fail 65 "--resume $TMP/resealed.h5: checksum mismatch: the file says" $once $common --batch-size 20 \
  --resume "$TMP/resealed.h5"
# reseal_attr SRC OUT ATTR: OUT is SRC with the string attribute ATTR's last character changed (type and
# length kept) and the seal made valid again: only the loader's own comparison of ATTR, if it compares the
# whole value, can refuse it.
reseal_attr() {
  "$PYTHON3" - "$@" <<'PY'
import hashlib, shutil, sys, h5py, numpy as np
src, out, attr = sys.argv[1:4]
shutil.copy(src, out)
with h5py.File(out, "a") as f:
    v = bytes(f.attrs[attr])
    f.attrs.modify(attr, np.bytes_(v[:-1] + (b"1" if v[-1:] == b"0" else b"0")))
body = open(out, "rb").read()[512:]
seal = b"mnist_ddp sealed file 1\nsha256 %s\nbytes %d\n" % (hashlib.sha256(body).hexdigest().encode(), len(body))
open(out, "wb").write(seal.ljust(512, b"\0") + body)
PY
}
# A checkpoint whose digest differs in its last hex digit, and one whose format differs in its last
# character; a model file whose format does.
reseal_attr "$(ckpt "$TMP/ck" 10)" "$TMP/lastdigit.h5" sha256
# shellcheck disable=SC2086
expect_fail 65 "--resume $TMP/lastdigit.h5: checksum mismatch: the file says" $once $common --batch-size 20 \
  --resume "$TMP/lastdigit.h5"
reseal_attr "$(ckpt "$TMP/ck" 10)" "$TMP/lastformat.h5" model_file_format
# shellcheck disable=SC2086
expect_fail 65 "--resume $TMP/lastformat.h5: not a mnist_ddp checkpoint" $once $common --batch-size 20 \
  --resume "$TMP/lastformat.h5"
reseal_attr "$TMP/m.h5" "$TMP/lastformat-model.h5" format
# shellcheck disable=SC2086
expect_fail 65 "--load-model $TMP/lastformat-model.h5: not a model file written by mnist_ddp" $once $common \
  --epochs 0 --load-model "$TMP/lastformat-model.h5"
# The undamaged files load (so the refusals above are about the damage).
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $common --epochs 0 --load-model "$TMP/m.h5" >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; fail "the intact model file does not load"; }
# (but the threads' fit to the CPUs, which depends on the machine: src/comm/cpu_fit.c)
! grep "warning" "$TMP/log" | grep -qv "take turns" || { cat "$TMP/log"; fail "a warning for a sealed model file"; }

# --resume auto: a damaged newest checkpoint (cut short) is skipped for the previous one, with a warning.
cp -r "$TMP/ck" "$TMP/auto"
damage "$(ckpt "$TMP/ck" 10)" "$(ckpt "$TMP/auto" 10)" cut@half
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/auto" >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/out" "$TMP/err"; fail "resume past a damaged newest checkpoint"; }
grep -q "warning: skipping corrupt checkpoint $(ckpt "$TMP/auto" 10): truncated" "$TMP/err" ||
  { cat "$TMP/err"; fail "no warning naming the damaged checkpoint"; }
grep -q "resumed from step 5" "$TMP/out" || { cat "$TMP/out"; fail "did not resume from the previous checkpoint"; }
# None valid: 65, naming them.
damage "$(ckpt "$TMP/ck" 10)" "$(ckpt "$TMP/auto" 10)" flip@half
damage "$(ckpt "$TMP/ck" 5)" "$(ckpt "$TMP/auto" 5)" h5edit
# shellcheck disable=SC2086
RUN_TIMEOUT=60 expect_fail 65 "no valid checkpoint among $(ckpt "$TMP/auto" 10), $(ckpt "$TMP/auto" 5)" \
  run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/auto"
# One checkpoint, damaged: none valid either (not a fresh start over it).
mkdir "$TMP/one"
damage "$(ckpt "$TMP/ck" 10)" "$(ckpt "$TMP/one" 10)" flip@half
# shellcheck disable=SC2086
RUN_TIMEOUT=60 expect_fail 65 "no valid checkpoint among $(ckpt "$TMP/one" 10)" \
  run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/one"
echo "ok: --resume auto falls back past a damaged newest checkpoint, and stops when none is valid (of 2, of 1)"
