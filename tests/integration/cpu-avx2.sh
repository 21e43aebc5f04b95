#!/bin/sh
# The CPU path of a CPU without AVX-512 (AMD Zen 2 and 3, the CPUs of Frontier, LUMI and Perlmutter; Intel
# before Skylake-SP), on this one: ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN's kernels and the project's own
# (src/nn/cpu/cpu_isa.h) as that CPU would. check_conv holds the layers (conv2 by wino43's AVX2 kernels) to
# the convolution's definition and finite differences; compare_model.py holds net and convnet, with every
# --conv, to PyTorch's loss, gradients and optimizer steps; a 2-rank training names the AVX2 kernels in its
# start-up table and learns. ONEDNN_MAX_CPU_ISA=AVX, below AVX2, turns the own kernels off ("no Winograd").
# check_wino43_isa compares the AVX2 kernels with the AVX-512 ones bit for bit where both run.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "SKIP: this CPU has no AVX2 with FMA: the AVX2 kernels cannot run here"
  exit 77
fi
onednn=0
grep -q '^#define HAVE_ONEDNN 1' "$abs_top_builddir/config.h" && onednn=1
export ONEDNN_MAX_CPU_ISA=AVX2

"$abs_top_builddir/tests/unit/check_conv" >"$TMP/conv.log" 2>&1 || { cat "$TMP/conv.log"; fail "check_conv under AVX2"; }
if [ $onednn = 1 ]; then
  grep -q "wino43's AVX2 kernels against the direct convolution" "$TMP/conv.log" ||
    { cat "$TMP/conv.log"; fail "check_conv under AVX2: wino43's AVX2 kernels did not run"; }
fi
echo "ok: check_conv with ONEDNN_MAX_CPU_ISA=AVX2"
"$PYTHON3" "$abs_top_srcdir/tests/reference/compare_model.py" >"$TMP/ref.log" 2>&1 ||
  { cat "$TMP/ref.log"; fail "compare_model.py under AVX2"; }
echo "ok: compare_model.py with ONEDNN_MAX_CPU_ISA=AVX2: $(tail -1 "$TMP/ref.log")"

# Adadelta's recipe, 150 steps of 2 x 64: the test accuracy after them was 96.2% (AVX2) and 96.9% (AVX-512).
# DNNL_MAX_CPU_ISA, oneDNN's older name, gives way to ONEDNN_MAX_CPU_ISA as in oneDNN itself.
DNNL_MAX_CPU_ISA=ALL run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps 150 --threads 1 --log-interval 1000 \
  --metrics "$TMP/avx2.json" >"$TMP/avx2.log" 2>&1 || { cat "$TMP/avx2.log"; fail "training under AVX2"; }
want='cpu, own Winograd AVX2'
[ $onednn = 1 ] && want='own Winograd AVX2'
[ "$(grep -c "$want" "$TMP/avx2.log")" -eq 2 ] || { cat "$TMP/avx2.log"; fail "start-up table: not '$want' on both ranks"; }
acc=$(json_field "$TMP/avx2.json" summary test_accuracy)
"$PYTHON3" -c "import sys; sys.exit(0 if float('$acc') >= 0.93 else 1)" || fail "under AVX2: test accuracy $acc after 150 steps"
echo "ok: 2 ranks under AVX2 ($want): test accuracy $acc after 150 steps"

if [ $onednn = 1 ]; then
  ONEDNN_MAX_CPU_ISA=AVX run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 0 >"$TMP/avx.log" 2>&1 ||
    { cat "$TMP/avx.log"; fail "ONEDNN_MAX_CPU_ISA=AVX"; }
  [ "$(grep -c 'oneDNN [0-9.]* no Winograd' "$TMP/avx.log")" -eq 2 ] ||
    { cat "$TMP/avx.log"; fail "ONEDNN_MAX_CPU_ISA=AVX: the own kernels not turned off"; }
  echo "ok: ONEDNN_MAX_CPU_ISA=AVX: no Winograd, oneDNN's and the project's"
fi
