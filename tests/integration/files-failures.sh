#!/bin/sh
# The trainer's outputs (--save-model, checkpoints, --metrics) on their failure paths and their modes:
# - the umask applies (077, 022 and 002 give 600, 644 and 664 files, 700, 755 and 775 for a created
#   --checkpoint-dir);
# - a full disk (RLIMIT_FSIZE: ulimit -f) while writing a checkpoint, the model or the metrics stops the
#   run with 74 and one line; no file under a final name is half-written, no temporary is left, the
#   metrics file keeps whole JSON lines only (and no SIGXFSZ kills the process);
# - a directory that takes no files (read-only: a tmpfs mounted ro as root, mode 555 otherwise) stops the
#   run with 73 before any training;
# - the temporary a writer killed by SIGKILL leaves behind (named after its pid and host) is removed by the
#   next run, with a warning; another live process's is kept. (A SIGTERM during a write is held until the
#   file is in place: tests/unit/check_atomic_file.)
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/small" 200 50
common="--data $TMP/small --batch-size 10 --epochs 1"
no_temps() { # no_temps DIR: no temporary of ours under DIR
  t=$(find "$1" -name '.*@*.tmp')
  [ -z "$t" ] || fail "temporary files left behind: $t"
}
one_error() { [ "$(grep -c 'error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err" >&2; fail "not exactly one error line"; }; }

# Modes under two umasks, for every output.
for mask in 077 022 002; do
  # shellcheck disable=SC2086
  (umask "$mask" && run_np 2 "$MNIST_DDP" $common --save-model "$TMP/m$mask.h5" --checkpoint-dir "$TMP/ck$mask" \
    --checkpoint-every 5 --metrics "$TMP/m$mask.json") >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "umask $mask run"; }
  file=$(printf '%o' $((0666 & ~0$mask))) dir=$(printf '%o' $((0777 & ~0$mask)))
  for f in "$TMP/m$mask.h5" "$TMP/m$mask.json" "$TMP/ck$mask/ckpt-000000000010.h5" "$TMP/ck$mask"; do
    want=$file
    [ -d "$f" ] && want=$dir
    got=$(stat -c %a "$f")
    [ "$got" = "$want" ] || fail "umask $mask: $f has mode $got, not $want"
  done
  echo "ok: umask $mask gives $file files and a $dir checkpoint directory"
done

# A full disk, as RLIMIT_FSIZE (ulimit -f, in 512-byte blocks in POSIX sh) below each file's size. One
# process, with PMIx's plain key store: Open MPI's shared-memory segments of a 2-rank job, and PMIx's
# default one (over 3 MB), would hit the limit first.
full() { # full BLOCKS ARGS...: run the trainer with its files limited to BLOCKS blocks
  blocks=$1; shift
  # shellcheck disable=SC2086,SC2016
  expect_fail 74 "$pattern" env PMIX_MCA_gds=hash sh -c 'ulimit -f "$0" && exec timeout -k 5 120 "$@"' \
    "$blocks" "$MNIST_DDP" $common "$@"
  one_error
}
mkdir "$TMP/full"
pattern="--checkpoint-dir $TMP/full/ck: writing checkpoint '$TMP/full/ck/ckpt-000000000005.h5' failed"
full 16384 --checkpoint-dir "$TMP/full/ck" --checkpoint-every 5 # 8 MB, a checkpoint is 14 MB
# Nothing but the directory's lock file, emptied on the way out.
[ "$(ls -A "$TMP/full/ck")" = mnist_ddp.lock ] && [ ! -s "$TMP/full/ck/mnist_ddp.lock" ] ||
  fail "a failed checkpoint write left $(ls -A "$TMP/full/ck")"
pattern="--save-model $TMP/full/m.h5: writing it failed"
full 4096 --save-model "$TMP/full/m.h5" # 2 MB, the model is 4.8 MB
[ ! -e "$TMP/full/m.h5" ] || fail "a failed --save-model left $TMP/full/m.h5"
pattern="--metrics $TMP/full/m.json: write failed: File too large"
full 2 --metrics "$TMP/full/m.json" --log-interval 1 # 1 KB: the run record (about 520 bytes) and a step or two
"$PYTHON3" - "$TMP/full/m.json" <<'PY' || fail "the metrics file of a full disk holds a partial line"
import json, sys
text = open(sys.argv[1]).read()
assert text.startswith('{"type":"run"'), "not the run record first"
assert text.endswith("\n"), "no newline at its end"
for line in text.splitlines():
    json.loads(line)
PY
no_temps "$TMP/full"
echo "ok: a full disk stops the run with 74 and leaves no partial file"

# A directory that takes no files: 73, before the data is read.
mkdir "$TMP/ro"
if [ "$(id -u)" -eq 0 ]; then # permissions do not stop root: a read-only file system does
  mount -t tmpfs -o ro,size=64k tmpfs "$TMP/ro" || fail "as root, this test mounts a read-only tmpfs on $TMP/ro"
  trap 'umount "$TMP/ro"; rm -rf "$TMP"' EXIT
else
  chmod 555 "$TMP/ro"
fi
for out in "--save-model $TMP/ro/m.h5" "--metrics $TMP/ro/m.json" "--checkpoint-dir $TMP/ro" \
  "--checkpoint-dir $TMP/ro/ck"; do
  # shellcheck disable=SC2086
  expect_fail 73 "${out% *} ${out#* }: cannot create" run_np 2 "$MNIST_DDP" $common $out
  one_error
  ! grep -q "^data:" "$TMP/out" || fail "the run read its data before checking ${out% *}"
done
[ -z "$(ls -A "$TMP/ro")" ] || fail "something was created in the read-only directory"

# Temporaries a killed writer left: a finished process's (a kill -9 mid-write leaves exactly such a file),
# and a live one's (this shell's).
host=$(hostname)
dead=$(sh -c 'echo $$')
mkdir "$TMP/stale"
stale_ckpt="$TMP/stale/.ckpt-000000000005.h5.$dead.0@$host.tmp" live_ckpt="$TMP/stale/.ckpt-000000000005.h5.$$.0@$host.tmp"
stale_model="$TMP/.m.h5.$dead.0@$host.tmp"
for f in "$stale_ckpt" "$live_ckpt" "$stale_model"; do
  head -c 1000 /dev/urandom >"$f"
done
# shellcheck disable=SC2086
run_np 2 "$MNIST_DDP" $common --checkpoint-dir "$TMP/stale" --save-model "$TMP/m.h5" >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/out" "$TMP/err"; fail "a run beside stale temporaries"; }
for f in "$stale_ckpt" "$stale_model"; do
  [ ! -e "$f" ] || fail "$f (its writer is gone) was not removed"
  grep -q "warning: removed $f, left by process $dead" "$TMP/err" || { cat "$TMP/err"; fail "no warning for $f"; }
done
[ -e "$live_ckpt" ] || fail "the temporary of a live process was removed"
echo "ok: temporaries of dead writers removed with a warning, a live one's kept"
