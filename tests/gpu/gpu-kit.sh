#!/bin/sh
# The GPU run kit (make gpu-kit, which runs tools/gpu-kit/make-kit.sh) is complete: in a root file system holding nothing
# but the kit, the C library, a shell, three coreutils and CUDA's library directory (as a GPU machine has it,
# at /usr/local/cuda/lib64; chroot in a private mount namespace: no /usr/lib, no Open MPI, HDF5 or OpenBLAS
# of this machine), ./run --cpu-only finds CUDA's libraries and trains on 2 ranks with the kit's own mpirun,
# plugins and libraries, and loads none of another PMIx's plugins where its PMIx searches them too (the H200
# machine's image had one). The GPU part needs a GPU and CUDA on the target: not checked
# here. Also: the tarball stays within 64 MiB (make-kit.sh refuses more), ./run --cpu-bench (the CPU
# benchmark against the PyTorch peer on a GPU machine's CPU) runs from the unpacked kit, and ./run --perf runs
# it after the GPU report where the loan's time allows.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
grep -q '^#define HAVE_CUDA 1' "$abs_top_builddir/config.h" || skip "CPU-only build (the kit holds the GPU build)"
need_data
for t in unshare chroot mount; do command -v $t >/dev/null || fail "$t (util-linux, coreutils) is needed"; done
# The loan's first command, as a GPU session types it (everything it depends on is built by make check already).
make -s -C "$abs_top_builddir" gpu-kit >"$TMP/make-kit.out" 2>&1 || { cat "$TMP/make-kit.out"; fail "make gpu-kit failed"; }
mv "$abs_top_builddir/mnist_ddp-gpu-kit.tar.gz" "$TMP/kit.tar.gz"

root=$TMP/root
mkdir -p "$root/kit" "$root/usr/local/cuda/lib64" "$root/bin" "$root/usr/bin" "$root/lib/x86_64-linux-gnu" \
  "$root/lib64" "$root/etc" \
  "$root/dev" "$root/proc" "$root/sys" "$root/tmp"
tar -C "$root/kit" -xzf "$TMP/kit.tar.gz"
# The base system: the C library's shared objects and loader, a shell, dirname, cat, env, timeout and date.
for f in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2; do
  cp -L "/lib/x86_64-linux-gnu/$f" "$root/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
cp -L /bin/dash "$root/bin/sh"
cp -L /usr/bin/dirname /usr/bin/cat /usr/bin/env /usr/bin/timeout /usr/bin/date "$root/usr/bin/"
cp /etc/passwd /etc/group "$root/etc/"
# Another PMIx's plugin where the kit's PMIx searches whatever its environment says (the H200 machine's image
# had one): it must not be loaded, or each process prints why it failed.
pdir=$root/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
mkdir -p "$pdir"
echo 'extern int pmix_output_info; int *pmix_other_version = &pmix_output_info;' |
  ${CC:-cc} -shared -fPIC -x c -o "$pdir/pmix_mca_pcompress_zlib.so" - || fail "cannot build a stand-in PMIx plugin"

# This machine's CUDA libraries (those mnist_ddp was linked with) stand for the GPU machine's.
cuda_lib=$(ldd "$abs_top_builddir/src/mnist_ddp" | sed -n 's|.*libcudart\.so[^ ]* => \(.*\)/libcudart.*|\1|p')
[ -d "$cuda_lib" ] || fail "cannot tell where mnist_ddp's libcudart is"
if [ "$(id -u)" -eq 0 ]; then ns="unshare -m"; else ns="unshare -rm"; fi
# shellcheck disable=SC2016
$ns sh -c '
  r=$1
  mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" &&
    mount --bind "$2" "$r/usr/local/cuda/lib64" &&
    mount -t tmpfs tmpfs "$r/tmp" || { echo "cannot mount in the namespace" >&2; exit 2; }
  exec chroot "$r" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp /kit/mnist_ddp-gpu-kit/run --cpu-only
' sh "$root" "$cuda_lib" >"$TMP/out" 2>&1 || true
cat "$TMP/out"
grep -q '^PASS: CPU-only training' "$TMP/out" || fail "the kit does not run by itself in a bare root file system"
grep -q '^PASS: cuBLAS opened at run time' "$TMP/out" || fail "the kit's environment does not open cuBLAS"
grep -q '^summary: test accuracy' "$TMP/out" || fail "no summary line from the kit's training run"
! grep -q 'component_repository_open' "$TMP/out" || fail "the kit's PMIx loads another PMIx's plugin"
# ./run --cpu-bench: make bench's benchmark from the unpacked kit, this machine's Python and PyTorch as the
# peer (on the kit's small shards, one round: the report's structure, not its figures).
mkdir "$TMP/unpacked" && tar -C "$TMP/unpacked" -xzf "$TMP/kit.tar.gz"
kit=$TMP/unpacked/mnist_ddp-gpu-kit
PYTHON3=$PYTHON3 BENCH_CPU_DATA=$kit/data/small BENCH_ROUNDS=1 BENCH_STEPS=4 sh "$kit/run" --cpu-bench "$TMP/cpu.txt" \
  >"$TMP/cpu.out" 2>&1 || { cat "$TMP/cpu.out"; fail "./run --cpu-bench failed"; }
grep -q '^CPU: ' "$TMP/cpu.txt" && { cat "$TMP/cpu.txt"; fail "./run --cpu-bench: the CPU twice (its CPU: line beside bench.sh's host:)"; }
for want in '^images/s .*x$' '; the peer: PyTorch [0-9]' '^host: .* CPUs; ' \
  '^  conv2 backward ' '^PASS: bench.sh'; do
  grep -q "$want" "$TMP/cpu.txt" || { cat "$TMP/cpu.txt"; fail "./run --cpu-bench: no line matching $want"; }
done
# ./run --perf, a loan's one command: the GPU report (strict: without a GPU its pre-flight fails), then the CPU
# benchmark in what is left of LOAN_SECONDS, or a line saying why not.
for loan in 600 0; do
  LOAN_SECONDS=$loan PYTHON3=$PYTHON3 BENCH_CPU_DATA=$kit/data/small BENCH_ROUNDS=1 BENCH_STEPS=4 \
    sh "$kit/run" --perf "$TMP/perf-$loan.txt" >"$TMP/perf.out" 2>&1 || true
  grep -q '^\(PASS\|FAIL\): bench-gpu.sh' "$TMP/perf-$loan.txt" || { cat "$TMP/perf-$loan.txt"; fail "--perf: no GPU report step"; }
done
grep -q '^PASS: bench.sh' "$TMP/perf-600.txt" || { cat "$TMP/perf-600.txt"; fail "--perf: no CPU benchmark after the GPU's"; }
grep -q '^SKIP: bench.sh (the CPU benchmark): -\?[0-9]* s left of LOAN_SECONDS=0$' "$TMP/perf-0.txt" ||
  { cat "$TMP/perf-0.txt"; fail "--perf, no time left: no line saying the CPU benchmark is skipped"; }
echo "ok: the kit trains with nothing but itself and the C library ($(($(wc -c <"$TMP/kit.tar.gz") / 1048576)) MiB)"
