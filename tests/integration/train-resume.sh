#!/bin/sh
# Training-state checkpoints (src/train/checkpoint.c): a run stopped by --max-steps and started again with the
# same command ends with the same parameters, bit for bit, as one that never stopped, whether it stopped
# inside an epoch or at its end; a checkpoint resumes on another world size with the same global batch
# (SGD: equal up to summation order); checkpoints of another run are refused (65) naming the setting and
# both values, a corrupt newest one is skipped for the previous one, none valid is 65, an unwritable
# directory is 73 before any training.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# 200 samples, 2 ranks x 16: 7 steps per epoch, the last one partial.
small_mnist "$TMP/data" 200 50
common="--data $TMP/data --batch-size 16 --epochs 2 --log-interval 100 --seed 4"

train() { # train NAME NP OPTIONS...: output in $TMP/NAME.log
  name=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  run_np "$np" "$MNIST_DDP" $common "$@" >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "run $name"; }
}
says() { # says NAME PATTERN: the run's output has the line
  grep -q -e "$2" "$TMP/$1.log" || { cat "$TMP/$1.log"; fail "$1 does not say '$2'"; }
}
# compare A B TOL: the state_dict tensors of files A and B (model files or checkpoints) differ by at most TOL
# (0: the same bits).
compare() {
  "$PYTHON3" - "$@" <<'PY' || fail "$1 and $2 differ by more than $3"
import sys, h5py, numpy as np
a, b, tol = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), float(sys.argv[3])
keys = sorted(k for k in a if isinstance(a[k], h5py.Dataset))
assert keys and keys == sorted(k for k in b if isinstance(b[k], h5py.Dataset)), (keys, list(b))
worst = max(float(np.max(np.abs(a[k][()].astype(np.float64) - b[k][()]))) for k in keys)
same = all(a[k][()].tobytes() == b[k][()].tobytes() for k in keys)
print("%s vs %s: max difference %g%s" % (sys.argv[1], sys.argv[2], worst, ", same bits" if same else ""))
sys.exit(0 if (same if tol == 0 else worst <= tol) else 1)
PY
}
ckpt() { printf '%s/ckpt-%012d.h5' "$1" "$2"; }

# Exact resume, Adadelta: stopped after step 10 (epoch 2, 3 of its steps done) and after step 7 (the end of
# epoch 1), then the same command without --max-steps.
train full 2 --save-model "$TMP/full.h5"
train mid1 2 --checkpoint-dir "$TMP/mid" --max-steps 10 --save-model "$TMP/mid-at10.h5" --metrics "$TMP/mid1.jsonl"
says mid1 "resume: no checkpoint in $TMP/mid, starting from scratch"
train mid2 2 --checkpoint-dir "$TMP/mid" --save-model "$TMP/mid.h5" --metrics "$TMP/mid2.jsonl"
says mid2 "resumed from step 10 (restart 1): $(ckpt "$TMP/mid" 10), epoch 2 after 3 of its steps"
# The metrics file's first record says what ran and from where: each start's own position, the same settings.
"$PYTHON3" - "$TMP/mid1.jsonl" "$TMP/mid2.jsonl" <<'PY' || fail "the metrics files' run records"
import json, sys
runs = []
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    assert rows[0]["type"] == "run" and sum(r["type"] == "run" for r in rows) == 1, (path, rows[0])
    runs.append(rows[0])
a, b = runs
where = lambda r: (r["start_step"], r["start_epoch"], r["restarts"], r["world"], r["steps_per_epoch"], r["max_steps"])
assert where(a) == (0, 1, 0, 2, 7, 10) and where(b) == (10, 2, 1, 2, 7, 0), (where(a), where(b))
assert a["settings"] == b["settings"], (a["settings"], b["settings"])
s = a["settings"]
assert (s["model"], s["seed"], s["global_batch"], s["train_samples"]) == ("net", "4", "32", "200"), s
assert a["device"] == "cpu" and a["version"] and a["launcher"] == "mpirun" and a["nodes"] == 1, a
PY
compare "$TMP/full.h5" "$TMP/mid.h5" 0
# The checkpoint's model part is what --save-model writes at the same step: PyTorch reads both alike.
compare "$TMP/mid-at10.h5" "$(ckpt "$TMP/mid" 10)" 0
# --checkpoint-keep 2 (the default): steps 7 and 10 of the first run, 14 of the second: 10 and 14 are left,
# beside the directory's lock file, emptied by the clean exit.
kept=$(find "$TMP/mid" -mindepth 1 -exec basename {} \; | sort | tr '\n' ' ')
[ "$kept" = "ckpt-000000000010.h5 ckpt-000000000014.h5 mnist_ddp.lock " ] || fail "checkpoints kept in $TMP/mid: $kept"
[ ! -s "$TMP/mid/mnist_ddp.lock" ] || fail "the lock file still names a holder after a clean exit"
train edge1 2 --checkpoint-dir "$TMP/edge" --max-steps 7
train edge2 2 --checkpoint-dir "$TMP/edge" --save-model "$TMP/edge.h5"
says edge2 "resumed from step 7 (restart 1)"
compare "$TMP/full.h5" "$TMP/edge.h5" 0
# A checkpoint outranks --load-model: a requeued job started with --load-model resumes where it stopped.
train load1 2 --checkpoint-dir "$TMP/load" --max-steps 7
train load2 2 --checkpoint-dir "$TMP/load" --load-model "$TMP/mid-at10.h5" --save-model "$TMP/load.h5"
says load2 "resumed from step 7 (restart 1)"
compare "$TMP/full.h5" "$TMP/load.h5" 0
# A file named by --resume, without a checkpoint directory.
train byname 2 --resume "$(ckpt "$TMP/mid" 10)" --save-model "$TMP/byname.h5"
compare "$TMP/full.h5" "$TMP/byname.h5" 0

# Elastic, SGD with momentum: 2 x 16 stopped at step 10, resumed on 4 x 8 (the same global batch of 32).
sgd="--optimizer sgd --lr 0.05 --momentum 0.5"
# shellcheck disable=SC2086
{
  train sgd-full 2 $sgd --save-model "$TMP/sgd-full.h5"
  train sgd1 2 $sgd --checkpoint-dir "$TMP/elastic" --checkpoint-every 5
  rm "$(ckpt "$TMP/elastic" 14)" # as if stopped after step 10
  train sgd2 4 $sgd --batch-size 8 --checkpoint-dir "$TMP/elastic" --save-model "$TMP/sgd-4x8.h5"
}
says sgd2 "resumed from step 10 (restart 1)"
compare "$TMP/sgd-full.h5" "$TMP/sgd-4x8.h5" 1e-5

# Checkpoints of another run: refused, naming the setting and both values.
refuse() { # refuse PATTERN NP OPTIONS...
  pattern=$1 np=$2; shift 2
  # shellcheck disable=SC2086
  expect_fail 65 "$pattern" run_np "$np" "$MNIST_DDP" $common --checkpoint-dir "$TMP/mid" "$@"
}
refuse "written with seed 4, this run has seed 5" 2 --seed 5
# The whole line: which file, which setting, and the hint that it is another run's (a damaged or unsealed file
# gets no such hint).
line=$(grep 'error:' "$TMP/err")
case $line in
  "mnist_ddp: error: --checkpoint-dir $TMP/mid: $(ckpt "$TMP/mid" 14): it was written with seed 4, this run has seed 5 (another run's checkpoint: use another --checkpoint-dir, or --resume never) [rank 0/2 on "*) ;;
  *) fail "the refusal of another run's checkpoint: $line" ;;
esac
refuse "written with model net, this run has model convnet" 2 --model convnet
refuse "written with optimizer adadelta, this run has optimizer sgd" 2 --optimizer sgd
refuse "written with lr 1, this run has lr 0.5" 2 --lr 0.5
refuse "written with gamma 0.7, this run has gamma 0.5" 2 --gamma 0.5
refuse "written with momentum 0, this run has momentum 0.5" 2 --momentum 0.5
refuse "written with weight_decay 0, this run has weight_decay 0.01" 2 --weight-decay 0.01
refuse "written with global_batch 32, this run has global_batch 48" 3
# convnet's default lr is 1e-4 x the ranks, so another world size is another lr: said in the digits that tell
# the two apart (stored with 17), with the fix; the file's lr given resumes it.
train cn2 2 --model convnet --checkpoint-dir "$TMP/cn" --max-steps 2
# shellcheck disable=SC2086
expect_fail 65 "written with lr 0.0002, this run has lr 0.0004; this model's default lr scales with the ranks: --lr \
with the file's value" run_np 4 "$MNIST_DDP" $common --batch-size 8 --model convnet --checkpoint-dir "$TMP/cn"
train cn4 4 --batch-size 8 --model convnet --checkpoint-dir "$TMP/cn" --max-steps 3 --lr 0.0002
says cn4 "resumed from step 2 (restart 1)"
small_mnist "$TMP/data190" 190 50
refuse "written with train_samples 200, this run has train_samples 190" 2 --data "$TMP/data190"
# Settings that differ in their last character only, and in the last setting checked (the training set's
# digest: the same 200 samples but the last pixel of the last image): compared whole, every one of them.
refuse "written with global_batch 32, this run has global_batch 34" 2 --batch-size 17
"$PYTHON3" - "$TMP/data" "$TMP/idx-last" <<'PY'
import glob, os, struct, sys, h5py, numpy as np
src, out = sys.argv[1:3]
os.makedirs(out, exist_ok=True)
files = sorted(glob.glob(os.path.join(src, "train-*.h5")))
imgs = np.concatenate([h5py.File(f, "r")["images"][:] for f in files])
labs = np.concatenate([h5py.File(f, "r")["labels"][:] for f in files])
imgs[-1, -1, -1] ^= 1
with open(os.path.join(out, "images"), "wb") as f:
    f.write(struct.pack(">IIII", 0x803, len(imgs), 28, 28)); f.write(imgs.tobytes())
with open(os.path.join(out, "labels"), "wb") as f:
    f.write(struct.pack(">II", 0x801, len(labs))); f.write(labs.tobytes())
PY
mkdir -p "$TMP/data-last" && cp "$TMP/data"/test* "$TMP/data-last/"
"$MNIST2H5" --images "$TMP/idx-last/images" --labels "$TMP/idx-last/labels" --out "$TMP/data-last" --shards 2 \
  --prefix train >/dev/null
refuse "written with train_source_sha256 [0-9a-f]*, this run has train_source_sha256 [0-9a-f]*" 2 \
  --data "$TMP/data-last"

# A corrupt newest checkpoint (one flipped byte) is skipped for the previous one; none valid is 65.
cp -r "$TMP/mid" "$TMP/corrupt"
"$PYTHON3" - "$(ckpt "$TMP/corrupt" 14)" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x40]))
PY
cp -r "$TMP/corrupt" "$TMP/none"
train corrupt 2 --checkpoint-dir "$TMP/corrupt" --save-model "$TMP/corrupt.h5"
says corrupt "skipping corrupt checkpoint $(ckpt "$TMP/corrupt" 14): checksum mismatch"
says corrupt "resumed from step 10"
compare "$TMP/full.h5" "$TMP/corrupt.h5" 0
# shellcheck disable=SC2086
{
  head -c 100000 "$(ckpt "$TMP/none" 10)" >"$TMP/truncated" && mv "$TMP/truncated" "$(ckpt "$TMP/none" 10)"
  expect_fail 65 "no valid checkpoint among $(ckpt "$TMP/none" 14), $(ckpt "$TMP/none" 10)" \
    run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/none"
  expect_fail 66 "--resume $TMP/nothing.h5: No such file" run_np 2 "$MNIST_DDP" $common --resume "$TMP/nothing.h5"

  # A directory that cannot be made: 73 before any data is read.
  touch "$TMP/file"
  expect_fail 73 "--checkpoint-dir $TMP/file/ckpt: cannot create it" \
    run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/file/ckpt"
}
! grep -q "^data:" "$TMP/out" || fail "the run read its data before checking --checkpoint-dir"
echo "ok: resume exact mid-epoch and at an epoch end, elastic 2x16 -> 4x8, refusals, corrupt and missing files"
