#!/bin/sh
# A seeded corruption campaign on shard sets written by mnist2h5: bit flips in the HDF5 metadata
# region and anywhere, truncations, zeroed runs, missing / extra / swapped shards, damaged manifests,
# and sets without a manifest that declare absurd sizes. Every case is run through shard_load (the
# reader's calls, without MPI) under a time limit, and must end with its sysexits code and one error
# line naming the file: never a signal, a hang, or success. A few cases then go through the trainer
# on 2 ranks. Set SEED to replay another campaign.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
P=$abs_top_builddir/tests/integration/shard_load
[ -x "$P" ] || fail "tests/integration/shard_load not built"
small_mnist "$TMP/good" 300 100

"$PYTHON3" - "$TMP/good" "$TMP/cases" "$P" "${SEED:-20261124}" <<'PY' ||
import hashlib, os, random, resource, shutil, subprocess, sys
import h5py, numpy as np

good, root, prog, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
shards = sorted(n for n in os.listdir(good) if n.endswith(".h5"))
cases = []  # (name, dir, expected exit, [texts the error line must hold], RLIMIT_AS or None)
SHA, SIZE, BAD = "does not match its SHA-256", "bytes, the manifest", "is damaged"

def fresh(name):
    d = os.path.join(root, "%03d-%s" % (len(cases), name))
    shutil.copytree(good, d)
    return d

def edit(path, fn):
    data = bytearray(open(path, "rb").read())
    before = bytes(data)
    data = fn(data)
    assert bytes(data) != before, "a no-op mutation: %s" % path  # every case must damage something
    open(path, "wb").write(data)

def flip(limit):
    def fn(b):
        k = rng.randrange(min(limit, len(b)) * 8)
        b[k // 8] ^= 1 << (k % 8)
        return b
    return fn

def zero_run(b):
    while True:
        at, n = rng.randrange(len(b)), rng.randint(1, 4096)
        if any(b[at:at + n]):
            b[at:at + n] = bytes(len(b[at:at + n]))
            return b

def add(name, d, code, text, limit=None):
    cases.append((name, d, code, text, limit))

# Damaged shard files: the manifest check must name each before HDF5 parses it.
for kind, limit, count in (("meta-flip", 4096, 24), ("any-flip", 1 << 40, 24)):
    for _ in range(count):
        s = rng.choice(shards)
        d = fresh(kind)
        edit(os.path.join(d, s), flip(limit))
        add(kind, d, 65, [s, SHA])
size = os.path.getsize(os.path.join(good, shards[1]))
for n in (0, 1, 512, 2048, 4096, size // 2, size - 1):
    d = fresh("truncate")
    edit(os.path.join(d, shards[1]), lambda b: b[:n])
    add("truncate-%d" % n, d, 65, [shards[1], SIZE])
for _ in range(8):
    s = rng.choice(shards)
    d = fresh("zero-run")
    edit(os.path.join(d, s), zero_run)
    add("zero-run", d, 65, [s, SHA])

# The set: a shard missing, one too many, two swapped.
d = fresh("missing")
os.remove(os.path.join(d, "train-00001-of-00002.h5"))
add("missing", d, 66, ["train-00001-of-00002.h5", "is missing"])
d = fresh("extra-index")
shutil.copy(os.path.join(d, "train-00001-of-00002.h5"), os.path.join(d, "train-00002-of-00002.h5"))
add("extra-index", d, 65, ["train-00002-of-00002.h5", "extra shard"])
d = fresh("extra-set")
shutil.copy(os.path.join(d, "train-00000-of-00002.h5"), os.path.join(d, "train-00000-of-00003.h5"))
add("extra-set", d, 65, ["train-00000-of-00003.h5", "mixes sets"])
d = fresh("swapped")
a, b = (os.path.join(d, "train-0000%d-of-00002.h5" % i) for i in (0, 1))
os.rename(a, a + ".x"); os.rename(b, a); os.rename(a + ".x", b)
add("swapped", d, 65, ["train-00000-of-00002.h5", SHA])

# Something else in a file's place: a FIFO (must not hang the reader) or a directory.
for name, path, text in (("fifo-shard", "train-00001-of-00002.h5", "is not a regular file"),
                         ("dir-shard", "test-00000-of-00002.h5", "is not a regular file"),
                         ("fifo-manifest", "train.manifest", BAD)):
    d = fresh(name)
    os.remove(os.path.join(d, path))
    (os.mkdir if name.startswith("dir") else os.mkfifo)(os.path.join(d, path))
    add(name, d, 65, [path, text])

# Damaged manifests: bit flips, truncations, garbage, and well-formed ones (valid self-digest) that
# claim absurd or inconsistent things.
man = "train.manifest"
for _ in range(10):
    d = fresh("manifest-flip")
    edit(os.path.join(d, man), flip(1 << 20))
    add("manifest-flip", d, 65, [man, BAD])
mlen = os.path.getsize(os.path.join(good, man))
for n in (0, 10, mlen // 2, mlen - 1):
    d = fresh("manifest-truncate")
    edit(os.path.join(d, man), lambda b: b[:n])
    add("manifest-truncate-%d" % n, d, 65, [man, BAD])
d = fresh("manifest-garbage")
edit(os.path.join(d, man), lambda b: bytearray(rng.randrange(256) for _ in range(600)))
add("manifest-garbage", d, 65, [man, BAD])
d = fresh("manifest-huge")
with open(os.path.join(d, man), "r+b") as f:
    f.truncate(1 << 30)  # sparse: refused by its size, never read
add("manifest-huge", d, 65, [man, BAD])

def rewrite(d, fn):
    path = os.path.join(d, man)
    lines = open(path).read().splitlines()[:-1]
    body = ("\n".join(fn(lines)) + "\n").encode()
    open(path, "wb").write(body + b"manifest_sha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n")

def setline(i, text):
    return lambda lines: lines[:i] + [text] + lines[i + 1:]

for name, fn in (("total-huge", setline(3, "total_samples 18446744073709551616")),
                 ("total-billions", setline(3, "total_samples 4000000000")),
                 ("shards-many", setline(2, "shards 99999")),
                 ("shards-zero", setline(2, "shards 0")),
                 ("other-prefix", setline(1, "prefix test")),
                 ("count-mismatch", lambda l: l[:5] + [" ".join(l[5].split()[:2] + ["151"] + l[5].split()[3:]),
                                                       " ".join(l[6].split()[:2] + ["149"] + l[6].split()[3:])]),
                 # the second shard alone, the total made to agree: the message names that shard
                 ("count-mismatch-1", lambda l: l[:3] + ["total_samples 299"] + l[4:6] +
                                                [" ".join(l[6].split()[:2] + ["149"] + l[6].split()[3:])]),
                 ("size-absurd", lambda l: l[:5] + [" ".join(l[5].split()[:3] + ["99999999999999"] + l[5].split()[4:])] + l[6:]),
                 ("dropped-file", lambda l: l[:6])):
    d = fresh("manifest-" + name)
    rewrite(d, fn)
    # a well-formed manifest listing the wrong sizes names the shard it disagrees with; counts that
    # disagree with the files are named once HDF5 has read them (verified files: safe to parse)
    text = {"size-absurd": ["train-00000-of-00002.h5", SIZE],
            "count-mismatch": ["train-00000-of-00002.h5", "holds 150 samples, its manifest"],
            "count-mismatch-1": ["train-00001-of-00002.h5", "holds 150 samples, its manifest"]}.get(name, [man, BAD])
    add("manifest-" + name, d, 65, text)

# No manifest (another tool): unverified, so HDF5 parses the files, but absurd declared sizes are
# refused before anything is allocated for them.
def h5set(name, n, chunk=None, maxshape=None, total=None):
    d = os.path.join(root, "%03d-%s" % (len(cases), name))
    shutil.copytree(good, d)
    os.remove(os.path.join(d, man))
    for f in os.listdir(d):
        if f.startswith("train-"):
            os.remove(os.path.join(d, f))
    with h5py.File(os.path.join(d, "train-00000-of-00001.h5"), "w") as h:
        for k, v in (("shard_index", 0), ("shard_count", 1)):
            h.attrs.create(k, v, dtype="u4")
        for k, v in (("total_samples", total or n), ("first_index", 0), ("num_samples", n)):
            h.attrs.create(k, v, dtype="u8")
        c = chunk or (min(n, 1024), 28, 28)
        h.create_dataset("images", (n, 28, 28), "u1", chunks=c, maxshape=maxshape, fletcher32=True)
        h.create_dataset("labels", (n,), "u1", chunks=(c[0],), maxshape=maxshape and maxshape[:1], fletcher32=True)
    return d

one = "train-00000-of-00001.h5"
add("no-manifest-total-attr", h5set("total-attr", 100, total=1 << 40), 65, [one, "declares 1099511627776 samples"])
add("no-manifest-billions", h5set("billions", 3 << 30, total=100), 65, [one, "/images declares 3221225472 samples"])
add("no-manifest-huge-chunk", h5set("huge-chunk", 100, (100000, 28, 28), (None, 28, 28)), 65,
    [one, "declares chunks [100000,28,28]"])
# 2 Mi samples are 1.5 GiB, one copy more than 1 GiB allows
add("no-manifest-memory", h5set("memory", 2 << 20), 71, ["/train-*.h5 holds 2097152 samples", "1570 MiB per rank"],
    1 << 30)

def limit_as(n):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (n, n)) if n else None

bad = 0
for name, d, code, text, limit in cases:
    try:
        r = subprocess.run([prog, d, "train", "test"], capture_output=True, text=True, timeout=30,
                           preexec_fn=limit_as(limit))
    except subprocess.TimeoutExpired:
        print("FAIL %s: hung (30 s) on %s" % (name, d)); bad += 1
        continue
    lines = r.stderr.splitlines()
    errors = [l for l in lines if l.startswith("shard_load: error: ")]
    others = [l for l in lines if l not in errors and not ("warning" in l and "has no manifest" in l)]
    why = None
    if r.returncode < 0:
        why = "killed by signal %d" % -r.returncode
    elif r.returncode != code:
        why = "exit %d, expected %d" % (r.returncode, code)
    elif len(errors) != 1 or others:
        why = "not one error line"
    elif any(t not in errors[0] for t in text):
        why = "the error line lacks one of %s" % text
    if why:
        bad += 1
        print("FAIL %s (%s): %s\n  %s" % (name, d, why, "\n  ".join(lines)))
    else:
        shutil.rmtree(d)
print("%d cases (seed %d), %d failed" % (len(cases), seed, bad))
sys.exit(1 if bad else 0)
PY
  fail "corruption campaign"

# Sets without a manifest: one warning per set, from rank 0 only, then the run proceeds.
rm "$TMP/good/train.manifest" "$TMP/good/test.manifest"
run_np 2 "$MNIST_DDP" --data "$TMP/good" --batch-size 10 --epochs 1 --max-steps 1 >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "a set without manifest did not load"; }
[ "$(grep -c 'has no manifest.*not verified' "$TMP/err")" -eq 2 ] || { cat "$TMP/err"; fail "expected 2 warnings"; }
[ "$(grep 'has no manifest' "$TMP/err" | grep -c 'rank 0/2')" -eq 2 ] ||
  { cat "$TMP/err"; fail "warnings not from rank 0 alone"; }
echo "ok: no manifest: 2 warnings from rank 0, run proceeds"
# Shards without the optional num_samples attribute (the datasets' sizes say it): read as before.
"$PYTHON3" - "$TMP/good" <<'PY' || fail "cannot remove num_samples"
import glob, sys, h5py
for p in glob.glob(sys.argv[1] + "/*.h5"):
    with h5py.File(p, "r+") as h:
        del h.attrs["num_samples"]
PY
run_np 2 "$MNIST_DDP" --data "$TMP/good" --batch-size 10 --epochs 1 --max-steps 1 >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "shards without num_samples did not load"; }
echo "ok: shards without num_samples load"

# The trainer on 2 ranks: a damaged shard and a damaged manifest end the job with 65 and a line
# naming the file (every rank verifies what it opens, and die() takes the job down).
small_mnist "$TMP/bad" 300 100
printf '\001' | dd of="$TMP/bad/train-00001-of-00002.h5" bs=1 seek=700 conv=notrunc 2>/dev/null
expect_fail 65 "shard '.*train-00001-of-00002.h5' does not match its SHA-256" run_np 2 "$MNIST_DDP" \
  --data "$TMP/bad" --batch-size 10 --epochs 1 --max-steps 1
grep -qi 'signal\|segmentation' "$TMP/err" && { cat "$TMP/err"; fail "a signal"; }
small_mnist "$TMP/bad2" 300 100
echo garbage >"$TMP/bad2/test.manifest"
expect_fail 65 "shard manifest '.*test.manifest' is damaged" run_np 2 "$MNIST_DDP" --data "$TMP/bad2" \
  --batch-size 10 --epochs 1 --max-steps 1
