#!/bin/sh
# mnist2h5 CLI: usage errors (64), missing input (66), bad data (65), unwritable output (73), and
# a successful conversion readable by h5dump -H and by h5py with the documented layout.
set -u
top=${abs_top_builddir:-$(cd "$(dirname "$0")/../.." && pwd)}
prog=$top/src/mnist2h5
py=${PYTHON3:-/usr/bin/python3}
[ -x "$prog" ] || { echo "mnist2h5.sh: $prog not built"; exit 99; }
# h5dump (hdf5-tools) and h5py read the output independently of our reader: required, never skipped.
"$py" -c 'import h5py, numpy' 2>/dev/null || { echo "mnist2h5.sh: needs python3 with h5py and numpy (apt-get install python3-h5py)"; exit 99; }
command -v h5dump >/dev/null 2>&1 || { echo "mnist2h5.sh: needs h5dump (apt-get install hdf5-tools)"; exit 99; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mnist2h5-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run CODE PATTERN ARGS...: mnist2h5 ARGS must exit CODE; for CODE != 0, stderr must be one line
# matching PATTERN (grep -E); for 0, stdout must match it.
run() {
  want=$1 pat=$2 before=$failures
  shift 2
  "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" != "$want" ]; then
    fail "mnist2h5 $*: exit $got, expected $want: $(cat "$tmp/err")"
    return
  fi
  if [ "$want" = 0 ]; then
    grep -Eq -- "$pat" "$tmp/out" || fail "mnist2h5 $*: stdout lacks /$pat/: $(cat "$tmp/out")"
  else
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "mnist2h5 $*: stderr is not one line: $(cat "$tmp/err")"
    grep -Eq -- "^mnist2h5: error: .*$pat" "$tmp/err" || fail "mnist2h5 $*: stderr lacks /$pat/: $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "mnist2h5 $*: wrote to stdout on error: $(cat "$tmp/out")"
  fi
  [ "$failures" != "$before" ] || echo "ok: mnist2h5 $* -> $got"
}

# whole_err TEXT / whole_out TEXT: the last run's stderr is exactly "mnist2h5: error: TEXT [host, SRC/FILE.c:LINE]"
# (SRC: src, or ../../src out of tree, as make distcheck builds), its stdout exactly TEXT: a message with a
# doubled space or an extra clause differs from the right one.
whole_err() {
  got=$(sed 's/ \[[^]]*, [./]*src\/[a-z0-9_/]*\.c:[0-9]*\]$//' "$tmp/err")
  [ "$got" = "mnist2h5: error: $1" ] || fail "stderr is not 'mnist2h5: error: $1 [...]': $(cat "$tmp/err")"
}
whole_out() { [ "$(cat "$tmp/out")" = "$1" ] || fail "stdout is not '$1': $(cat "$tmp/out")"; }

# Synthetic IDX files: NAME N [bad]; the first labels are MNIST's.
mkidx() {
  "$py" - "$tmp/$1" "$2" "${3-}" <<'EOF'
import random, struct, sys
base, n, bad = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = random.Random(n)
first = [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
labels = bytes((first + [r.randrange(10) for _ in range(n)])[:n])
pixels = bytes(r.randrange(256) for _ in range(n * 784))
img_magic, lab_magic, cols = 0x803, 0x801, 28
if bad == "label": labels = labels[:3] + b"\x0b" + labels[4:]
if bad == "magic": img_magic = 0x801
if bad == "size": cols = 27; pixels = pixels[: n * 28 * 27]
if bad == "truncated": pixels = pixels[:-1]
if bad == "trailing": pixels += b"\0\0"
open(base + "-images", "wb").write(struct.pack(">IIII", img_magic, n, 28, cols) + pixels)
open(base + "-labels", "wb").write(struct.pack(">II", lab_magic, n if bad != "count" else n - 1) + labels[: n - (bad == "count")])
EOF
}

mkidx good 1000
mkidx small 5
mkidx empty 0
for b in label magic size truncated trailing count; do mkidx "bad-$b" 20 "$b"; done
I=$tmp/good-images L=$tmp/good-labels out=$tmp/out-dir

# --- usage (64), help, version
run 0 '^Usage: mnist2h5 --images FILE --labels FILE --out DIR --shards N' --help
run 0 '^mnist2h5 \(mnist_ddp\) [0-9]' --version
run 64 'missing option --images'
whole_err 'missing option --images (see mnist2h5 --help)'
run 64 'missing option --labels' --images "$I"
run 64 'missing option --out' --images "$I" --labels "$L" --shards 2
run 64 'missing option --shards' --images "$I" --labels "$L" --out "$out"
run 64 'unknown option --bogus' --bogus --images "$I"
run 64 'unknown option -x' -x
run 64 'option needs a value: --shards' --images "$I" --labels "$L" --out "$out" --shards
run 64 "invalid --shards 'abc'" --images "$I" --labels "$L" --out "$out" --shards abc
run 64 "invalid --shards '0'" --images "$I" --labels "$L" --out "$out" --shards 0
run 64 "invalid --shards '-2'" --images "$I" --labels "$L" --out "$out" --shards -2
run 64 "invalid --shards '100000'" --images "$I" --labels "$L" --out "$out" --shards 100000
whole_err "invalid --shards '100000': expected an integer 1..99999 (see mnist2h5 --help)"
run 64 "invalid --shards '2x'" --images "$I" --labels "$L" --out "$out" --shards 2x
# 99999 (SHARDS_MAX) is a valid count, refused only for these 1000 samples.
run 64 "invalid --shards 99999: more shards than the 1000 samples of '$I'" --images "$I" --labels "$L" --out "$out" \
  --shards 99999
run 64 "invalid --prefix '../up'" --images "$I" --labels "$L" --out "$out" --shards 2 --prefix ../up
run 64 "invalid --prefix '-dash': use letters, digits, '_', '.', '-' \\(not first\\), at most 64" \
  --images "$I" --labels "$L" --out "$out" --shards 2 --prefix -dash
run 64 "invalid --prefix '.dot': use letters" --images "$I" --labels "$L" --out "$out" --shards 2 --prefix .dot
# An empty file name, for each of the three options that take one (the output's before any input is read).
run 64 'empty file name given to --images \(see mnist2h5 --help\) \[' --images "" --labels "$L" --out "$out" --shards 2
run 64 'empty file name given to --labels \(see mnist2h5 --help\) \[' --images "$I" --labels "" --out "$out" --shards 2
run 64 'empty file name given to --out \(see mnist2h5 --help\) \[' --images "$I" --labels "$L" --out "" --shards 2
run 64 'unexpected argument stray' --images "$I" --labels "$L" --out "$out" --shards 2 stray
run 64 'more shards than the 5 samples' --images "$tmp/small-images" --labels "$tmp/small-labels" --out "$out" --shards 6
run 65 "IDX files '$tmp/empty-images' and '$tmp/empty-labels' hold no samples" \
  --images "$tmp/empty-images" --labels "$tmp/empty-labels" --out "$out" --shards 1
whole_err "IDX files '$tmp/empty-images' and '$tmp/empty-labels' hold no samples"
# --- missing input (66)
run 66 "'$tmp/nope-images'.*No such file" --images "$tmp/nope-images" --labels "$L" --out "$out" --shards 2
run 66 "'$tmp/nope-labels'.*No such file" --images "$I" --labels "$tmp/nope-labels" --out "$out" --shards 2
# --- bad data (65): each names the file and the problem
run 65 "bad-label-labels'.*label 11 at index 3" --images "$tmp/bad-label-images" --labels "$tmp/bad-label-labels" --out "$out" --shards 2
run 65 "bad-magic-images'.*wrong magic 0x00000801" --images "$tmp/bad-magic-images" --labels "$tmp/bad-magic-labels" --out "$out" --shards 2
run 65 "bad-size-images'.*28x27" --images "$tmp/bad-size-images" --labels "$tmp/bad-size-labels" --out "$out" --shards 2
run 65 "bad-truncated-images'.*truncated" --images "$tmp/bad-truncated-images" --labels "$tmp/bad-truncated-labels" --out "$out" --shards 2
run 65 "bad-trailing-images'.*2 trailing bytes" --images "$tmp/bad-trailing-images" --labels "$tmp/bad-trailing-labels" --out "$out" --shards 2
run 65 "count mismatch: images file '$tmp/bad-count-images' has 20 images but labels file '$tmp/bad-count-labels' has 19 labels" --images "$tmp/bad-count-images" --labels "$tmp/bad-count-labels" --out "$out" --shards 2
run 65 "'$L' has wrong magic 0x00000801 \\(that of an IDX labels file; expected 0x00000803\\): are the images and labels files swapped\\?" --images "$L" --labels "$I" --out "$out" --shards 2
[ ! -e "$out" ] || fail "failed runs created $out"
# --- unwritable output (73): root ignores permissions, so a path under a regular file and /proc
echo x >"$tmp/plain-file"
run 73 "cannot create output directory '$tmp/plain-file/sub'" --images "$I" --labels "$L" --out "$tmp/plain-file/sub" --shards 2
run 73 "/proc/mnist2h5-test" --images "$I" --labels "$L" --out /proc/mnist2h5-test/x --shards 2

# --- success: 3 training shards and 1 test file in a new nested directory
run 0 "wrote 1000 samples .*/nested/train-00000-of-00003.h5 .. train-00002-of-00003.h5" \
  --images "$I" --labels "$L" --out "$out/nested" --shards 3
run 0 "wrote 1000 samples .*/nested/test-00000-of-00001.h5" --images "$I" --labels "$L" --out "$out/nested" --shards 1 --prefix test
whole_out "mnist2h5: wrote 1000 samples ($I) to $out/nested/test-00000-of-00001.h5"
# shellcheck disable=SC2012
listing=$(ls -A "$out/nested" | tr '\n' ' ')
[ "$listing" = "test-00000-of-00001.h5 test.manifest train-00000-of-00003.h5 train-00001-of-00003.h5 train-00002-of-00003.h5 train.manifest " ] ||
  fail "unexpected files (temporaries left?): $listing"
# As many shards as samples: one sample each (--shards 6 above, one more than the 5 samples, is refused).
run 0 "wrote 5 samples .*/each/train-00000-of-00005.h5 .. train-00004-of-00005.h5$" \
  --images "$tmp/small-images" --labels "$tmp/small-labels" --out "$out/each" --shards 5
whole_out "mnist2h5: wrote 5 samples ($tmp/small-images) to $out/each/train-00000-of-00005.h5 .. train-00004-of-00005.h5"

h5dump -H "$out/nested/train-00001-of-00003.h5" >"$tmp/h5dump.txt" 2>&1 || fail "h5dump -H failed: $(cat "$tmp/h5dump.txt")"
for pat in 'DATASET "images"' 'H5T_STD_U8LE' '\( 333, 28, 28 \)' 'DATASET "labels"' '\( 333 \)' \
  'ATTRIBUTE "shard_index"' 'ATTRIBUTE "shard_count"' 'ATTRIBUTE "total_samples"' 'ATTRIBUTE "first_index"' \
  'ATTRIBUTE "source_sha256"' 'ATTRIBUTE "prefix"'; do
  grep -Eq "$pat" "$tmp/h5dump.txt" || fail "h5dump -H lacks /$pat/"
done
h5dump -A -a /first_index "$out/nested/train-00001-of-00003.h5" 2>&1 | grep -q '(0): 334' ||
  fail "h5dump: first_index of shard 1 is not 334"
h5dump -p -H "$out/nested/train-00000-of-00003.h5" 2>&1 | grep -q 'CHECKSUM' || fail "h5dump -p: no Fletcher-32 filter"
echo "ok: h5dump -H / -A / -p"

# The manifests, checked with Python's own SHA-256: every file's size, digest and sample count, the
# totals, the source digest, and the manifest's digest of itself (src/data/manifest.h has the format).
if "$py" - "$out/nested" "$I" <<'EOF'; then echo "ok: manifests"; else fail "manifest check"; fi
import hashlib, os, sys
d, images = sys.argv[1:3]
src = hashlib.sha256(open(images, "rb").read()).hexdigest()
for prefix, m, sizes in (("train", 3, [334, 333, 333]), ("test", 1, [1000])):
    raw = open(os.path.join(d, prefix + ".manifest"), "rb").read()
    body, last = raw[:raw.rindex(b"manifest_sha256 ")], raw[raw.rindex(b"manifest_sha256 "):]
    assert last == b"manifest_sha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n", last
    lines = body.decode().splitlines()
    assert lines[:5] == ["mnist_ddp-shard-manifest 1", "prefix " + prefix, "shards %d" % m,
                         "total_samples 1000", "source_sha256 " + src], lines[:5]
    assert len(lines) == 5 + m, lines
    for i, line in enumerate(lines[5:]):
        name = "%s-%05d-of-%05d.h5" % (prefix, i, m)
        data = open(os.path.join(d, name), "rb").read()
        want = "file %s %d %d %s" % (name, sizes[i], len(data), hashlib.sha256(data).hexdigest())
        assert line == want, (line, want)
EOF

if "$py" - "$out/nested" "$I" "$L" <<'EOF'; then echo "ok: h5py layout"; else fail "h5py layout check"; fi
import hashlib, sys
import h5py, numpy as np
d, images, labels = sys.argv[1:4]
raw_i = open(images, "rb").read()
raw_l = open(labels, "rb").read()
want_i = np.frombuffer(raw_i[16:], np.uint8).reshape(-1, 28, 28)
want_l = np.frombuffer(raw_l[8:], np.uint8)
sha = hashlib.sha256(raw_i).hexdigest()
def s(v): return v.decode() if isinstance(v, bytes) else str(v)
for prefix, m in (("train", 3), ("test", 1)):
    got_i, got_l, first = [], [], 0
    for i in range(m):
        with h5py.File(f"{d}/{prefix}-{i:05d}-of-{m:05d}.h5", "r") as f:
            a = f.attrs
            n = 1000 // m + (i < 1000 % m)
            assert int(a["shard_index"]) == i and int(a["shard_count"]) == m, dict(a)
            assert int(a["total_samples"]) == 1000 and int(a["first_index"]) == first, dict(a)
            assert int(a["num_samples"]) == n
            assert s(a["source_sha256"]) == sha and s(a["prefix"]) == prefix, dict(a)
            im, lb = f["images"], f["labels"]
            assert im.dtype == np.uint8 and lb.dtype == np.uint8
            assert im.shape == (n, 28, 28) and lb.shape == (n,), (im.shape, lb.shape)
            assert im.chunks == (min(n, 1024), 28, 28) and lb.chunks[0] == min(n, 65536), (im.chunks, lb.chunks)
            assert im.fletcher32 and lb.fletcher32
            got_i.append(im[...]); got_l.append(lb[...])
            first += n
    assert np.array_equal(np.concatenate(got_i), want_i), prefix
    assert np.array_equal(np.concatenate(got_l), want_l), prefix
    assert list(want_l[:10]) == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
EOF

# --- converting again with another shard count replaces the old set (one warning per stale file)
"$prog" --images "$I" --labels "$L" --out "$out/nested" --shards 2 >/dev/null 2>"$tmp/err" || fail "re-conversion failed"
[ "$(grep -c 'warning: removed stale shard' "$tmp/err")" = 3 ] || fail "stale shards not reported: $(cat "$tmp/err")"
# shellcheck disable=SC2012
listing=$(ls -A "$out/nested" | tr '\n' ' ')
[ "$listing" = "test-00000-of-00001.h5 test.manifest train-00000-of-00002.h5 train-00001-of-00002.h5 train.manifest " ] ||
  fail "after re-conversion: $listing"

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all mnist2h5 CLI checks passed"
