#!/bin/sh
# Every invalid option, missing or wrong input, and unwritable output: one line naming the culprit,
# a distinct exit status, on every rank, and no hang.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data

"$MNIST_DDP" --help | grep -q -- '--batch-size' || fail "--help does not list the options"
"$MNIST_DDP" --help | grep -q -- '--profile .*table of where the time went' || fail "--help does not describe --profile"
"$MNIST_DDP" --version | grep -q '^mnist_ddp ' || fail "--version"
# Both asked for: the first wins, whichever it is.
[ "$("$MNIST_DDP" --help --version | head -n 1)" = "Usage: mnist_ddp [OPTION]..." ] || fail "--help --version: no usage text"
out=$("$MNIST_DDP" --version --help)
case $out in "mnist_ddp "[0-9]*) ;; *) fail "--version --help: '$out', not the version alone" ;; esac
[ "$(echo "$out" | wc -l)" = 1 ] || fail "--version --help: $(echo "$out" | wc -l) lines, not the version's one"
# Neither starts MPI (a login node's may not start: here a transport that does not exist), and under a
# launcher only its rank 0 prints.
OMPI_MCA_pml=no-such-pml "$MNIST_DDP" --help | grep -q -- '--batch-size' || fail "--help needs MPI to start"
OMPI_MCA_pml=no-such-pml "$MNIST_DDP" --frobnicate --version | grep -q '^mnist_ddp ' ||
  fail "--version needs MPI to start, or gives way to an unknown option"
[ "$(run_np 2 "$MNIST_DDP" --help | grep -c '^Usage:')" = 1 ] || fail "mpirun -np 2 --help: not one usage text"
# mpirun inside a Slurm allocation: a Slurm rank variable left in the environment does not outrank mpirun's.
[ "$(SLURM_PROCID=0 run_np 2 "$MNIST_DDP" --help | grep -c '^Usage:')" = 1 ] ||
  fail "mpirun -np 2 --help with SLURM_PROCID=0 set: not one usage text"

for bad in "--batch-size 0" "--batch-size abc" "--test-batch-size -3" "--epochs x" "--lr -1" "--lr nan" \
           "--gamma 1e999" "--seed -5" "--log-interval 0" "--model resnet" "--optimizer adam" "--momentum 2" \
           "--accum-steps 0" "--max-steps -1" "--threads 0" "--device tpu" "--precision fp8" "--conv fft" "--cuda-graph yes" \
           "--bootstrap-addr nohost" "--bootstrap-addr host:70000" "--bootstrap-addr :29500" "--bootstrap-addr fe80::1:29500" \
           "--comm-timeout 0" "--bucket-mb -1" "--comm-progress -1" "--comm-progress 2000000" "--frobnicate" "--data" "--save-model=" "--profile=yes" \
           "--device c" "--optimizer ada" "--conv wino" "--model ne" "--conv="; do
  opt=${bad%% *}; opt=${opt%%=*}
  # shellcheck disable=SC2086
  # A short run behind the bad option: should it ever be accepted, the test fails fast instead of training.
  expect_fail 64 "$opt" "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1 $bad
done
expect_fail 64 "unexpected argument 'stray'" "$MNIST_DDP" --data "$MNIST_DATA" stray
# Both reduced precisions are the GPU's: each refused on the CPU, with the whole reason.
for p in bf16 tf32; do
  expect_fail 64 "--precision $p: only the GPU path computes in reduced precision; the CPU uses fp32" \
    "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --precision $p --epochs 1 --max-steps 1
done
# MNIST_DDP_CONV1 (the GPU's one-kernel conv1): a value it does not know, or the CPU path, ends the run (78).
expect_fail 78 "MNIST_DDP_CONV1=fast: im2col (the default) or direct" \
  env MNIST_DDP_CONV1=fast "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_CONV1=direct: the GPU path only" \
  env MNIST_DDP_CONV1=direct "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
# MNIST_DDP_HEAD (the GPU's one-kernel training head): the same.
expect_fail 78 "MNIST_DDP_HEAD=one: composed (the default) or fused" \
  env MNIST_DDP_HEAD=one "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_HEAD=fused: the GPU path only" \
  env MNIST_DDP_HEAD=fused "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
# MNIST_DDP_POOL (the GPU's pool with dropout1 both ways and conv2's bias gradient; fused is the default): the
# same for the composed kernels, and the default named on the CPU is no error.
expect_fail 78 "MNIST_DDP_POOL=on: fused (the default) or composed" \
  env MNIST_DDP_POOL=on "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_POOL=composed: the GPU path only" \
  env MNIST_DDP_POOL=composed "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
env MNIST_DDP_POOL=fused "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1 >"$TMP/pool" 2>&1 ||
  { cat "$TMP/pool"; fail "MNIST_DDP_POOL=fused (the default) refused on the CPU"; }
# Its summary line, whole: one step (singular), one epoch begun.
grep -Eq '^summary: test accuracy [0-9]+\.[0-9]{2}%, 1 epoch, 1 step, train [0-9.]+ s, total [0-9.]+ s, [0-9]+ images/s, 1 rank, peak memory [0-9]+ MiB per rank$' \
  "$TMP/pool" || { cat "$TMP/pool"; fail "the summary line of one step"; }
# --device cpu asks no GPU anything: no line of the GPU probe's (which --device auto prints where none is usable).
! grep -q '^device auto:' "$TMP/pool" || { cat "$TMP/pool"; fail "--device cpu: the GPU was probed"; }
# MNIST_DDP_CONV2 (the GPU's conv2 without a column buffer): the same.
expect_fail 78 "MNIST_DDP_CONV2=implicit: im2col (the default), direct or 3xtf32" \
  env MNIST_DDP_CONV2=implicit "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_CONV2=direct: the GPU path only" \
  env MNIST_DDP_CONV2=direct "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
# MNIST_DDP_BACKWARD (the GPU's fc weight gradients on a second stream): the same.
expect_fail 78 "MNIST_DDP_BACKWARD=parallel: serial (the default) or forked" \
  env MNIST_DDP_BACKWARD=parallel "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_BACKWARD=forked: the GPU path only" \
  env MNIST_DDP_BACKWARD=forked "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_CONV2=3xtf32: the GPU path only" \
  env MNIST_DDP_CONV2=3xtf32 "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
# MNIST_DDP_FC (the GPU's fc forward as cuBLASLt matmuls): the same; its default trains on the CPU.
expect_fail 78 "MNIST_DDP_FC=lt: gemm (the default) or epilogue" \
  env MNIST_DDP_FC=lt "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
expect_fail 78 "MNIST_DDP_FC=epilogue: the GPU path only" \
  env MNIST_DDP_FC=epilogue "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1
env MNIST_DDP_FC=gemm "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 1 >"$TMP/fc" 2>&1 ||
  { cat "$TMP/fc"; fail "MNIST_DDP_FC=gemm (the default) refused on the CPU"; }
# MNIST_DDP_STRAGGLER's SECONDS: up to 3600, so 3600 is taken and 3600.5 is not (the step, 1000, is never
# reached: nobody sleeps).
env MNIST_DDP_STRAGGLER=0:1000:3600 "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1 >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; fail "MNIST_DDP_STRAGGLER=0:1000:3600 refused"; }
expect_fail 78 "environment variable MNIST_DDP_STRAGGLER='0:1000:3600.5': RANK:STEP:SECONDS expected" \
  env MNIST_DDP_STRAGGLER=0:1000:3600.5 "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
# MNIST_DDP_ARM_ALONE: 0 or 1; anything else (a word, 2) ends the run; 0, 1 and empty train.
for v in yes 2; do
  expect_fail 78 "MNIST_DDP_ARM_ALONE=$v: 0 (the default) or 1" \
    env MNIST_DDP_ARM_ALONE=$v "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1
done
for v in 0 1 ''; do
  env MNIST_DDP_ARM_ALONE=$v "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --max-steps 1 >"$TMP/alone" 2>&1 ||
    { cat "$TMP/alone"; fail "MNIST_DDP_ARM_ALONE='$v' refused"; }
done
# --help lists every variant the code reads, under its heading; none is an option.
"$MNIST_DDP" --help >"$TMP/help"
read_vars=$(sed -n 's/.*{NULL, "\(MNIST_DDP_[A-Z0-9_]*\)".*/\1/p; s/.*, "\(MNIST_DDP_[A-Z0-9_]*\)", NULL,.*/\1/p' \
  "$abs_top_srcdir/src/train/options.c" | sort -u)
[ "$(echo "$read_vars" | wc -l)" -eq 9 ] || fail "the variants table names $(echo "$read_vars" | wc -l) variables, not 9"
shown=$(sed -n '/^Variants for measurement/,/^  --help/s/^  \(MNIST_DDP_[A-Z0-9_]*\) .*/\1/p' "$TMP/help" | sort)
[ "$shown" = "$read_vars" ] || fail "--help's variants ($(echo $shown)) are not the table's ($(echo $read_vars))"
echo "ok: --help lists the 8 variants: $(echo $shown)"
if ! grep -q '^#define HAVE_CUDA 1' "$abs_top_builddir/config.h"; then
  expect_fail 69 "--device cuda" "$MNIST_DDP" --data "$MNIST_DATA" --device cuda
fi
# --conv onednn, winograd, wino43 and the default, auto (= wino43): oneDNN's convolutions where the build has
# them (the start-up table says which; "no Winograd": a CPU without AVX-512, or ONEDNN_MAX_CPU_ISA below it;
# "own Winograd": the project's own Winograd beside oneDNN's, "own Winograd AVX2" its AVX2 kernels where
# oneDNN has no Winograd), else 69 on every rank; im2col is always there. Without oneDNN, wino43 and auto are
# the own kernels alone ("cpu, own Winograd"), on a CPU with AVX2 or AVX-512 (auto: else im2col).
conv_line() { # the start-up table's backend line of a run with --conv $1, once per rank
  run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --conv "$1" --epochs 0 >"$TMP/conv.log" 2>&1 \
    && [ "$(grep -Ec 'cpu, (im2col|oneDNN|own)' "$TMP/conv.log")" -eq 2 ] || { cat "$TMP/conv.log" >&2; fail "--conv $1"; }
  grep -Eo 'cpu, (im2col|oneDNN|own)[a-zA-Z0-9 .]*[a-z]( AVX2)?' "$TMP/conv.log" | sort -u
}
if grep -q '^#define HAVE_ONEDNN 1' "$abs_top_builddir/config.h"; then
  line=$(conv_line onednn) && echo "$line" | grep -q '^cpu, oneDNN [0-9.]* direct$' \
    || fail "--conv onednn: start-up table says '$line'"
  line=$(conv_line winograd) && echo "$line" | grep -Eq '^cpu, oneDNN [0-9.]* (no )?Winograd$' \
    || fail "--conv winograd: start-up table says '$line'"
  if ! echo "$line" | grep -q 'no Winograd'; then
    own="${line% Winograd} own Winograd"
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    own="${line% no Winograd} own Winograd AVX2"
  else
    own=$line
  fi
  line=$(conv_line wino43) && [ "$line" = "$own" ] || fail "--conv wino43: start-up table says '$line', not '$own'"
  [ "$(conv_line auto)" = "$line" ] || fail "--conv auto is not wino43"
else
  for conv in onednn winograd; do
    expect_fail 69 "--conv $conv: this mnist_ddp was built without oneDNN" run_np 2 "$MNIST_DDP" \
      --data "$MNIST_DATA" --device cpu --conv $conv
  done
  own='cpu, im2col conv'
  if grep -qw avx512f /proc/cpuinfo; then
    own='cpu, own Winograd'
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    own='cpu, own Winograd AVX2'
  fi
  line=$(conv_line auto) && [ "$line" = "$own" ] || fail "--conv auto without oneDNN: start-up table says '$line', not '$own'"
  [ "$own" = 'cpu, im2col conv' ] || [ "$(conv_line wino43)" = "$own" ] || fail "--conv wino43 is not auto"
fi
line=$(conv_line im2col) && echo "$line" | grep -q '^cpu, im2col conv$' || fail "--conv im2col: start-up table says '$line'"

# Under MPI every rank must stop with the same status, not hang.
expect_fail 64 "--batch-size" run_np 2 "$MNIST_DDP" --batch-size -1

# Inputs.
expect_fail 66 "--data $TMP/nope: No such file or directory" "$MNIST_DDP" --data "$TMP/nope"
: >"$TMP/afile"
expect_fail 66 "--data $TMP/afile: not a directory" "$MNIST_DDP" --data "$TMP/afile"
mkdir "$TMP/empty"
expect_fail 66 "$TMP/empty" run_np 2 "$MNIST_DDP" --data "$TMP/empty"
small_mnist "$TMP/small" 100 50
# The training set against one step of every rank (2 x B of 100 samples): B = 49 and 50 train, 51 is refused.
for b in 49 50; do
  run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size $b --epochs 1 --max-steps 1 >"$TMP/fit" 2>&1 ||
    { cat "$TMP/fit"; fail "--batch-size $b: 2 x $b of 100 training samples refused"; }
done
expect_fail 64 "--batch-size 51: 2 ranks x 51 = 102 samples per step, but $TMP/small holds only 100 training samples" \
  run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 51 --epochs 1 --max-steps 1
# --resume names a file unless it is exactly auto or never: a file that starts like one is still a file.
(cd "$TMP" && expect_fail 66 "--resume autosave.h5: No such file or directory" "$MNIST_DDP" --data "$TMP/small" \
  --batch-size 10 --max-steps 1 --checkpoint-dir "$TMP/resume-ckpt" --resume autosave.h5)
# A small training subset beside a larger test set: the test share is staged in a buffer of its own size.
small_mnist "$TMP/subset" 100 2000
"$MNIST_DDP" --data "$TMP/subset" --batch-size 10 --epochs 1 --max-steps 2 >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; fail "100 training samples beside 2000 test samples"; }
grep -q '(.*/2000)' "$TMP/log" || { cat "$TMP/log"; fail "the 2000 test samples were not all evaluated"; }
# --profile is a flag: accepted alone, its table printed (even with nothing trained).
"$MNIST_DDP" --data "$TMP/small" --batch-size 10 --epochs 0 --profile >"$TMP/log" 2>&1 &&
  grep -q '^profile: seconds per phase' "$TMP/log" || { cat "$TMP/log"; fail "--profile"; }
# Its summary line, whole: an evaluation alone is 0 epochs (plural), one rank (singular).
grep -Eq '^summary: test accuracy [0-9]+\.[0-9]{2}%, 0 epochs, 0 steps, train [0-9.]+ s, total [0-9.]+ s, [0-9]+ images/s, 1 rank, peak memory [0-9]+ MiB per rank$' \
  "$TMP/log" || { cat "$TMP/log"; fail "the summary line of an evaluation alone (--epochs 0)"; }
expect_fail 64 "--batch-size 64" run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 64
expect_fail 66 "--load-model" "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --load-model "$TMP/none.h5"
echo "not hdf5" > "$TMP/junk.h5"
expect_fail 65 "not an HDF5 file" "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --load-model "$TMP/junk.h5"
"$MNIST_DDP" --data "$TMP/small" --batch-size 10 --epochs 1 --model convnet --save-model "$TMP/convnet.h5" \
  >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "tiny convnet run"; }
grep -Eq '^summary: test accuracy [0-9]+\.[0-9]{2}%, 1 epoch, [0-9]+ steps, train [0-9.]+ s, total [0-9.]+ s, [0-9]+ images/s, 1 rank, peak memory [0-9]+ MiB per rank$' \
  "$TMP/log" || { cat "$TMP/log"; fail "the summary line of one epoch"; }
expect_fail 65 "holds model 'convnet'" run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 10 \
  --load-model "$TMP/convnet.h5"
# A model file (cut from a real one) that lacks a tensor or has one of another shape.
"$MNIST_DDP" --data "$TMP/small" --batch-size 10 --epochs 0 --save-model "$TMP/net.h5" >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; fail "saving an initial model"; }
"$PYTHON3" - "$TMP" <<'PY'
import sys, h5py
import numpy as np
d = sys.argv[1]
# Rewritten by h5py, as other tools write model files (no mnist_ddp seal: edited in place, a sealed file
# would be refused as damaged before these checks).
with h5py.File(f"{d}/net.h5", "r") as src:
    for name in ("missing", "shape", "prefix"):
        with h5py.File(f"{d}/{name}.h5", "w") as f:
            for k in src:
                f[k] = src[k][()]
            f.attrs.update(src.attrs)
with h5py.File(f"{d}/missing.h5", "a") as f:
    del f["fc1.bias"]
with h5py.File(f"{d}/shape.h5", "a") as f:
    w = f["conv2.weight"][()]
    del f["conv2.weight"]
    f["conv2.weight"] = w[:, :, :, :2]
# The same tensors under a model name that begins with the run's: another model all the same.
with h5py.File(f"{d}/prefix.h5", "a") as f:
    f.attrs["model"] = np.bytes_(b"netv2")  # a fixed-length string, as mnist_ddp writes its attributes
PY
one_error() { [ "$(grep -c 'error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err" >&2; fail "not exactly one error line"; }; }
expect_fail 65 "--load-model $TMP/missing.h5: tensor 'fc1.bias' is missing" run_np 2 "$MNIST_DDP" --data "$TMP/small" \
  --batch-size 10 --load-model "$TMP/missing.h5"
grep -q "missing.h5: no mnist_ddp checksum header" "$TMP/err" || fail "no warning for a file without the seal"
one_error
expect_fail 65 "--load-model $TMP/shape.h5: tensor 'conv2.weight' has another shape" run_np 2 "$MNIST_DDP" \
  --data "$TMP/small" --batch-size 10 --load-model "$TMP/shape.h5"
one_error
expect_fail 65 "^mnist_ddp: error: --load-model $TMP/prefix.h5: holds model 'netv2', but this run trains 'net' (use --model netv2) \\[" \
  run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --load-model "$TMP/prefix.h5"
one_error

# Outputs: checked before training, so no run is lost at its end.
expect_fail 73 "--save-model" run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 10 \
  --save-model "$TMP/no/such/dir/m.h5"
expect_fail 73 "--metrics" "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --metrics "$TMP/no/such/m.json"
# A directory where the model file should go (it once trained the whole run, then failed to rename onto it).
mkdir "$TMP/a-dir"
expect_fail 73 "--save-model $TMP/a-dir: cannot create a file there: Is a directory" run_np 2 "$MNIST_DDP" \
  --data "$TMP/small" --batch-size 10 --save-model "$TMP/a-dir"
! grep -q "^epoch 1" "$TMP/out" || fail "--save-model DIR: trained before refusing"
# A metrics file that stops taking lines mid-run (a full disk): 74 at the first line lost, not success.
[ -c /dev/full ] || fail "/dev/full is missing: it stands for a full disk here"
expect_fail 74 "--metrics /dev/full: write failed" run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 10 \
  --epochs 1 --max-steps 1 --metrics /dev/full
one_error
ls "$TMP"/no 2>/dev/null && fail "a failed run created output"
[ -z "$(find "$TMP" -name '*.tmp*')" ] || fail "temporary files left behind"
# More accumulation than an epoch has batches: allowed (one optimizer step per epoch), but said, once.
run_np 2 "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --epochs 1 --accum-steps 1000 >"$TMP/out" 2>"$TMP/err" ||
  { cat "$TMP/err"; fail "--accum-steps 1000 did not run"; }
[ "$(grep -c 'warning: --accum-steps 1000: an epoch holds [0-9]* batches per rank, so each epoch is one optimizer step' \
  "$TMP/err")" = 1 ] && grep -q '; 1 step per epoch$' "$TMP/out" || { cat "$TMP/out" "$TMP/err"; fail "--accum-steps 1000"; }
echo "all bad-input cases behave"
