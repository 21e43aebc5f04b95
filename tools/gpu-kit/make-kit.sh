#!/bin/sh
# make gpu-kit: a tarball that validates mnist_ddp on a bare GPU machine (the NVIDIA driver and CUDA, maybe
# PyTorch's NCCL, but no Open MPI, HDF5, OpenBLAS or network): the --with-cuda binaries and GPU test programs in
# the build tree's layout, every shared library they and Open MPI's mpirun, orted and plugins load except the
# NVIDIA driver's, CUDA's and the C library's, Open MPI's and PMIx's plugins and help files (relocated with
# OPAL_PREFIX / PMIX_PREFIX), the MNIST shards and a small cut of them, and tools/gpu-kit/run, which finds the
# machine's CUDA, cuBLAS and NCCL and writes one report.
# Usage: make-kit.sh BUILDDIR SRCDIR OUT.tar.gz
set -eu
build=$1 src=$2 out=$3
name=mnist_ddp-gpu-kit
limit=$((64 * 1024 * 1024))
stage=$(mktemp -d "${TMPDIR:-/tmp}/gpu-kit.XXXXXX")
trap 'rm -rf "$stage"' EXIT
k=$stage/$name
ompi=/usr/lib/x86_64-linux-gnu/openmpi   # Debian/Ubuntu layout, prefix /usr
pmix=/usr/lib/x86_64-linux-gnu/pmix2
gpu_tests="gpu_backend mpi_gpu_device mpi_gpu_allreduce check_cublas_dl" # the GPU test programs the kit runs
set -- "$build/src/mnist_ddp" "$build/src/mnist2h5" "$build/data/mnist"
for t in $gpu_tests; do set -- "$@" "$build/tests/gpu/$t"; done
for f in "$@"; do
  [ -e "$f" ] || { echo "make-kit: $f is missing (configure --with-cuda; make; make data)" >&2; exit 1; }
done
[ -d "$ompi/lib/openmpi3" ] || { echo "make-kit: no Open MPI plugins in $ompi/lib/openmpi3" >&2; exit 1; }

mkdir -p "$k/src" "$k/tests/gpu" "$k/tests/bench" "$k/tests/reference" "$k/bin" "$k/lib" "$k/data"
cp "$build/src/mnist_ddp" "$build/src/mnist2h5" "$k/src/"
for t in $gpu_tests; do cp "$build/tests/gpu/$t" "$k/tests/gpu/"; done
cp "$src/tests/lib.sh" "$src/tests/run-test" "$k/tests/"
cp "$src/tests/gpu/gpu-train.sh" "$src/tests/gpu/gpu-proxy.sh" "$k/tests/gpu/"
cp "$src/tests/bench/bench-gpu.sh" "$src/tests/bench/bench_gpu_report.py" "$src/tests/bench/bench.sh" \
  "$k/tests/bench/"
# The benchmark's PyTorch peers, for a GPU machine whose Python has PyTorch and h5py.
cp "$src/tests/reference/pytorch_ddp_mnist.py" "$src/tests/reference/pytorch_tuned_mnist.py" \
  "$src/tests/reference/eval_saved_model.py" "$k/tests/reference/"
cp "$src/tools/gpu-kit/run" "$k/run"
cp -r "$build/data/mnist" "$k/data/mnist"
# A small shard set for the quick CPU-only check (512 training, 200 test samples cut from the real ones).
mkdir -p "$stage/idx"
"${PYTHON3:-python3}" - "$build/data/mnist" "$stage/idx" <<'PY'
import glob, os, struct, sys, h5py, numpy as np
src, out = sys.argv[1:3]
for prefix, n in (("train", 512), ("test", 200)):
    f = sorted(glob.glob(os.path.join(src, prefix + "-*.h5")))[0]
    with h5py.File(f, "r") as h:
        imgs, labs = h["images"][:n], h["labels"][:n]
    with open(os.path.join(out, prefix + "-images"), "wb") as o:
        o.write(struct.pack(">IIII", 0x803, n, 28, 28)); o.write(imgs.tobytes())
    with open(os.path.join(out, prefix + "-labels"), "wb") as o:
        o.write(struct.pack(">II", 0x801, n)); o.write(labs.tobytes())
PY
for p in train test; do
  "$build/src/mnist2h5" --images "$stage/idx/$p-images" --labels "$stage/idx/$p-labels" --out "$k/data/small" \
    --shards 2 --prefix "$p" >/dev/null
done
# Open MPI under the prefix OPAL_PREFIX=$k replaces /usr with: bin/, lib/x86_64-linux-gnu/openmpi/..., share/openmpi.
cp -L /usr/bin/mpirun "$k/bin/mpirun"
cp -L /usr/bin/orted "$k/bin/orted"
mkdir -p "$k/lib/x86_64-linux-gnu/openmpi/lib" "$k/share"
cp -r "$ompi/lib/openmpi3" "$k/lib/x86_64-linux-gnu/openmpi/lib/"
cp -r /usr/share/openmpi "$k/share/openmpi"
if [ -d "$pmix/lib/pmix" ]; then
  mkdir -p "$k/lib/x86_64-linux-gnu/pmix2/lib" "$k/lib/x86_64-linux-gnu/pmix2/share"
  cp -r "$pmix/lib/pmix" "$k/lib/x86_64-linux-gnu/pmix2/lib/"
  [ -d "$pmix/share/pmix" ] && cp -r "$pmix/share/pmix" "$k/lib/x86_64-linux-gnu/pmix2/share/"
fi

# The shared-library closure (ldd resolves transitively), minus what the target machine brings: the C
# library and loader, the NVIDIA driver and the CUDA libraries (run finds them there).
libc_re='linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so'
cuda_re='libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia|libnvrtc|libnvJitLink'
skip="^($libc_re|$cuda_re)"
find "$k/src" "$k/tests/gpu" "$k/bin" "$k/lib/x86_64-linux-gnu" -type f | while read -r f; do
  file -L "$f" | grep -q 'ELF' || continue
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  printf '%s\n' "$soname" | grep -Eq "$skip" && continue
  [ -e "$k/lib/$soname" ] || cp -L "$path" "$k/lib/$soname"
done
strip --strip-unneeded "$k"/lib/*.so* "$k/src/"* "$k/tests/gpu/"* "$k/bin/"* 2>/dev/null || true
cuda_major=$(ldd "$build/src/mnist_ddp" | sed -n 's/.*libcudart\.so\.\([0-9]*\).*/\1/p' | head -1)
echo "${cuda_major:-13}" >"$k/cuda-major"
tar -C "$stage" -czf "$out" "$name"
size=$(wc -c <"$out")
[ "$size" -le "$limit" ] || { echo "make-kit: $out is $size bytes, over the 64 MiB limit" >&2; rm -f "$out"; exit 1; }
echo "make-kit: $out ($((size / 1024 / 1024)) MiB; CUDA $cuda_major libraries come from the target machine)"
