# Sourced by the integration tests: paths, a temp dir removed on exit, and expectations.
# automake's harness exports abs_top_builddir, MNIST_DATA, MPIEXEC, PYTHON3 (see Makefile.am).
set -u
: "${abs_top_builddir:?run through make check, or export abs_top_builddir}"
: "${abs_top_srcdir:=$abs_top_builddir}"
: "${MNIST_DATA:=$abs_top_builddir/data/mnist}"
: "${PYTHON3:=/usr/bin/python3}"
MNIST_DDP=$abs_top_builddir/src/mnist_ddp
MNIST2H5=$abs_top_builddir/src/mnist2h5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# One BLAS thread per rank: the tests oversubscribe the two cores.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mnist_ddp_test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# Wall clocks of the benchmarks: t0=$(now); ...; ms_since "$t0" prints the milliseconds since.
now() { date +%s%N; }
ms_since() { echo $(( ($(now) - $1) / 1000000 )); }

# mpirun with a hard time limit: a hang is a failure, never a stuck CI job.
run_np() {
  np=$1; shift
  timeout -k 10 "${RUN_TIMEOUT:-600}" "${MPIEXEC:-mpirun}" --oversubscribe -np "$np" "$@"
}

# launcher_failed RC FILE: mpirun itself failed to end a job after MPI_Abort, FILE its stderr: a backtrace of
# mpirun's own, or killed by run_np's time limit (RC 124 or 137) after it announced the abort. Debian 12's
# Open MPI 4.1 at times segfaults in PMIx_server_finalize, or hangs, while a job ends that way, most often
# when a rank had finalised before (open-mpi/ompi#6222 and #13650 report the like).
launcher_failed() {
  grep -Eq '^\[[^]]*\] \[ *[0-9]+\] [^ ]*/(mpirun|orterun)\(' "$2" && return 0
  { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; } && grep -q '^MPI_ABORT was invoked' "$2"
}

# expect_fail CODE PATTERN CMD...: CMD exits with CODE and its stderr names PATTERN; expect_s: the seconds
# CMD took (its second run's where mpirun failed the first: launcher_failed).
# (CMD may be run_np, which bounds MPI runs in time; a single process has no peer to wait for.)
expect_fail() {
  code=$1 pattern=$2; shift 2
  set +e
  t_expect=$(date +%s)
  "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ "$rc" -ne "$code" ] && launcher_failed "$rc" "$TMP/err"; then
    echo "note: mpirun itself failed to end the job after MPI_Abort (exit $rc; an Open MPI defect): once more"
    t_expect=$(date +%s)
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
  fi
  expect_s=$(($(date +%s) - t_expect))
  set -e
  if [ "$rc" -ne "$code" ]; then
    cat "$TMP/out" "$TMP/err" >&2
    fail "expected exit $code, got $rc: $*"
  fi
  grep -q -e "$pattern" "$TMP/err" || { cat "$TMP/err" >&2; fail "stderr of '$*' does not mention '$pattern'"; }
  echo "ok: exit $code, '$(grep -m1 -e "$pattern" "$TMP/err")'"
}

# gpu_probe: whether this machine has a usable GPU, asked the way a user does: --device cuda stops with 69
# and "no usable GPU" (the reason on the same line) before it reads any data. Sets gpu_rc (the probe's
# exit status) and gpu_reason (empty unless no GPU is usable); its output is in $TMP/probe.out and .err.
gpu_probe() {
  set +e
  run_np 1 "$MNIST_DDP" --device cuda --epochs 0 --data "$MNIST_DATA" >"$TMP/probe.out" 2>"$TMP/probe.err"
  gpu_rc=$?
  set -e
  gpu_reason=
  if [ "$gpu_rc" -eq 69 ] && grep -q 'no usable GPU' "$TMP/probe.err"; then
    gpu_reason=$(grep -m1 'no usable GPU' "$TMP/probe.err" | sed -e 's/^[^:]*: error: //' -e 's/ \[[^]]*\]$//')
  fi
}

# need_gpu: for a test that trains on the GPU: skip (77) with the reason without a usable GPU or without the
# MNIST shards (make check prepares them; make check-gpu does not); fail when the probe failed otherwise.
need_gpu() {
  gpu_probe
  [ -z "$gpu_reason" ] || skip "$gpu_reason"
  [ -d "$MNIST_DATA" ] || skip "no MNIST shards in $MNIST_DATA (run 'make data' first)"
  [ "$gpu_rc" -eq 0 ] || { cat "$TMP/probe.out" "$TMP/probe.err"; fail "--device cuda --epochs 0 exited with $gpu_rc"; }
}

# gpu_count: GPUs this process may use: CUDA_VISIBLE_DEVICES when set (Slurm sets it), else what
# nvidia-smi lists; 1 when neither says.
gpu_count() {
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
  else
    echo 1
  fi
}

need_data() {
  [ -d "$MNIST_DATA" ] || fail "no MNIST shards in $MNIST_DATA (make check runs 'make data' first)"
}

# running PID: the process runs or is stopped; gone, or a zombie its (new) parent has yet to reap, has ended.
# running_st: its state as ps prints it (T: stopped).
running() { running_st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${running_st#Z}" = "$running_st" ]; }

# same_model A B: the two model files (--save-model) hold the same tensors, bit for bit.
same_model() {
  "$PYTHON3" - "$1" "$2" <<'PY'
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert list(a) and list(a) == list(b)
sys.exit(0 if all(a[k][()].tobytes() == b[k][()].tobytes() for k in a) else 1)
PY
}

# A value of the JSON line of TYPE in a metrics file: json_field FILE TYPE KEY
json_field() {
  "$PYTHON3" - "$@" <<'PY'
import json, sys
path, kind, key = sys.argv[1:4]
rows = [json.loads(l) for l in open(path) if l.strip()]
rows = [r for r in rows if r.get("type") == kind]
if not rows:
    sys.exit("no %s line in %s" % (kind, path))
print(rows[-1][key])
PY
}

# small_mnist DIR NTRAIN NTEST: a tiny shard set cut from the real one (for fast failure tests).
small_mnist() {
  "$PYTHON3" - "$MNIST_DATA" "$TMP/idx" "$2" "$3" <<'PY'
import glob, os, struct, sys, h5py, numpy as np
src, out, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
for prefix, n in (("train", ntrain), ("test", ntest)):
    imgs, labs = [], []
    for f in sorted(glob.glob(os.path.join(src, prefix + "-*.h5"))):
        with h5py.File(f, "r") as h:
            imgs.append(h["images"][:]); labs.append(h["labels"][:])
    imgs, labs = np.concatenate(imgs)[:n], np.concatenate(labs)[:n]
    with open(os.path.join(out, prefix + "-images"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28)); f.write(imgs.tobytes())
    with open(os.path.join(out, prefix + "-labels"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(labs.tobytes())
PY
  for p in train test; do
    "$MNIST2H5" --images "$TMP/idx/$p-images" --labels "$TMP/idx/$p-labels" --out "$1" --shards 2 --prefix "$p" >/dev/null
  done
}
