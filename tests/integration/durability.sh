#!/bin/sh
# Durability order, observed (issue 33): every output mnist_ddp and mnist2h5 write atomically is written to
# a temporary that is fsync'ed before it is renamed over the final name, and the directory is fsync'ed
# after the rename (else a power loss can leave the new name pointing at unwritten blocks, or lose the
# rename). The order is read from the system calls themselves: tests/integration/syscall_log.so, preloaded,
# logs open, fsync, close and rename with their paths. Checked for: the shards and the manifest of
# mnist2h5; the --save-model file, every checkpoint kept and the --metrics log (written in place: fsync'ed
# before its last close) of a short training run. Nothing else shows this order: a missing fsync or a
# rename moved before it leaves every file complete while the machine stays up.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
SHIM=$abs_top_builddir/tests/integration/syscall_log.so
[ -f "$SHIM" ] || fail "$SHIM not built (make check builds it)"
# A preloaded library before the sanitizers' runtime stops ASan ("ASan runtime does not come first").
for bin in "$MNIST_DDP" "$MNIST2H5"; do
  if ldd "$bin" | grep -q -e libasan -e libtsan; then
    echo "SKIP: $bin is built with a sanitizer, which an LD_PRELOAD library cannot precede"
    exit 77
  fi
done

# A synthetic set (no MNIST needed): 300 training samples, 100 test samples.
"$PYTHON3" - "$TMP/idx" <<'PY'
import os, random, struct, sys
out = sys.argv[1]
os.makedirs(out)
rng = random.Random(33)
for prefix, n in (("train", 300), ("test", 100)):
    with open(os.path.join(out, prefix + "-images"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(rng.randrange(256) for _ in range(n * 784)))
    with open(os.path.join(out, prefix + "-labels"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(rng.randrange(10) for _ in range(n)))
PY

# traced LOG CMD...: CMD with every file-system call of interest logged to LOG.
traced() {
  log=$1; shift
  SYSCALL_LOG=$log LD_PRELOAD=$SHIM "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "$*"; }
}
# durable LOG FILE...: each FILE was renamed into place after its temporary's fsync and before its
# directory's fsync; "inplace:FILE" instead: FILE was fsync'ed before its last close.
durable() {
  "$PYTHON3" - "$@" <<'PY'
import os, sys
log, finals = sys.argv[1], sys.argv[2:]
events = []  # (pid, op, a, b), in call order
for line in open(log):
    f = line.rstrip("\n").split(" ", 3)
    if f[1] in ("fsync", "close", "open"):
        events.append((f[0], f[1], os.path.normpath(f[3]), None))
    elif f[1] == "rename":
        old, new = f[2], f[3]
        events.append((f[0], "rename", os.path.normpath(old), os.path.normpath(new)))
bad = []
for final in finals:
    if final.startswith("inplace:"):
        path = os.path.normpath(final[8:])
        closes = [i for i, e in enumerate(events) if e[1] == "close" and e[2] == path]
        if not closes or not any(e[1] == "fsync" and e[2] == path for e in events[:closes[-1]]):
            bad.append("%s: not fsync'ed before its last close" % path)
        continue
    path = os.path.normpath(final)
    renames = [i for i, e in enumerate(events) if e[1] == "rename" and e[3] == path]
    if not renames:
        bad.append("%s: never renamed into place" % path)
        continue
    r = renames[-1]
    pid, tmp = events[r][0], events[r][2]
    if not any(e[0] == pid and e[1] == "fsync" and e[2] == tmp for e in events[:r]):
        bad.append("%s: its temporary %s was not fsync'ed before the rename" % (path, tmp))
    if not any(e[0] == pid and e[1] == "fsync" and e[2] == os.path.dirname(path) for e in events[r + 1:]):
        bad.append("%s: its directory was not fsync'ed after the rename" % path)
for b in bad:
    print("FAIL:", b)
print("checked %d files in %s: %s" % (len(finals), log, "bad" if bad else "ok"))
sys.exit(1 if bad else 0)
PY
}

# mnist2h5: three shards and the manifest, renamed together at the end, then the directory.
traced "$TMP/convert.log" "$MNIST2H5" --images "$TMP/idx/train-images" --labels "$TMP/idx/train-labels" \
  --out "$TMP/set" --shards 3 --prefix train
[ -s "$TMP/convert.log" ] || fail "the shim logged nothing (not preloaded?)"
durable "$TMP/convert.log" "$TMP/set/train-00000-of-00003.h5" "$TMP/set/train-00001-of-00003.h5" \
  "$TMP/set/train-00002-of-00003.h5" "$TMP/set/train.manifest" || fail "mnist2h5's outputs"
"$MNIST2H5" --images "$TMP/idx/test-images" --labels "$TMP/idx/test-labels" --out "$TMP/set" --shards 1 \
  --prefix test >/dev/null

# The trainer, one process (an MPI singleton): the model file, the checkpoints kept, the metrics log.
mkdir "$TMP/o"
traced "$TMP/train.log" timeout -k 5 120 "$MNIST_DDP" --data "$TMP/set" --batch-size 50 --epochs 1 \
  --save-model "$TMP/o/m.h5" --checkpoint-dir "$TMP/o/ck" --checkpoint-every 2 --metrics "$TMP/o/metrics.tsv"
ckpts=$(find "$TMP/o/ck" -name 'ckpt-*.h5' | sort)
[ "$(echo "$ckpts" | wc -l)" -ge 2 ] || fail "expected at least 2 checkpoints kept, found: $ckpts"
# shellcheck disable=SC2086
durable "$TMP/train.log" "$TMP/o/m.h5" $ckpts "inplace:$TMP/o/metrics.tsv" || fail "the trainer's outputs"
echo "ok: every output fsync'ed before its rename, its directory after"
