#!/bin/sh
# The GPU build's run-time library path (configure, m4/mnist_cuda.m4): every RUNPATH entry of mnist_ddp is
# a real directory named without symlinks (/usr/local/cuda may point at another CUDA major version on the
# node that runs it), and the loader finds libcudart and libnccl there or in the system's own directories,
# with no LD_LIBRARY_PATH. cuBLAS is not linked (its constructors cost every process about 0.5 s): the GPU
# path opens it (src/gpu/cuda/cublas_dl.c), and dlopen finds it in the same places. No GPU needed.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
B=$abs_top_builddir/src/mnist_ddp
grep -q '^#define HAVE_CUDA 1' "$abs_top_builddir/config.h" || skip "CPU-only build (configure --with-cuda)"
command -v readelf >/dev/null || fail "readelf (binutils) is needed"
paths=$(readelf -d "$B" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p')
[ -n "$paths" ] || fail "mnist_ddp has no RUNPATH: the CUDA libraries are found only through LD_LIBRARY_PATH"
deps=$(env -u LD_LIBRARY_PATH ldd "$B")
major=$(printf '%s\n' "$deps" | sed -n 's/.*libcudart\.so\.\([0-9]*\) .*/\1/p')
# dlopen's search from the binary: its run path (the first entry that has it), then the loader's cache.
cublas=
old_ifs=$IFS; IFS=:
for d in $paths; do
  [ -d "$d" ] || fail "RUNPATH entry $d is not a directory"
  real=$(cd "$d" && pwd -P)
  [ "$real" = "$d" ] || fail "RUNPATH entry $d goes through a symlink (resolves to $real)"
  [ -n "$cublas" ] || [ ! -e "$d/libcublas.so.$major" ] || cublas=$d/libcublas.so.$major
done
IFS=$old_ifs
for lib in libcudart libnccl; do
  line=$(printf '%s\n' "$deps" | grep "$lib\.so") || fail "mnist_ddp does not link $lib"
  case $line in *"not found"*) fail "the loader does not find $lib without LD_LIBRARY_PATH: $line" ;; esac
  echo "ok: $(echo "$line" | sed 's/^[[:space:]]*//; s/ (0x.*//')"
done
! printf '%s\n' "$deps" | grep -q 'libcublas' || fail "mnist_ddp links cuBLAS (every start would run its constructors)"
[ -n "$cublas" ] || cublas=$(ldconfig -p | sed -n "s/.*libcublas\.so\.$major .*=> //p" | head -n 1)
[ -n "$cublas" ] || fail "libcublas.so.$major is in neither mnist_ddp's RUNPATH nor the loader's cache"
echo "ok: libcublas.so.$major opened at run time from $cublas"
echo "ok: RUNPATH $paths"
