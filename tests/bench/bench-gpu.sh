#!/bin/sh
# GPU benchmark, and the performance half of the GPU report (make gpu-report, the kit's ./run --perf: both
# set BENCH_GPU_STRICT=1). Not a test: it prints figures and asserts nothing about them. In order:
# - pre-flight: the GPUs, driver and the CUDA version it supports, the CUDA runtime, cuBLAS and NCCL that
#   mnist_ddp loads, and mnist_ddp's own probe. Strict, a missing library or an unusable GPU is a failure
#   (exit 1); otherwise (make bench-gpu on a machine without a GPU) it says so and succeeds;
# - then the runs in order of value (a run cut short still holds the first): (1) where a replayed step's time
#   goes (--profile with graphs: stamp kernels between phases), fp32 and tf32, and where nsys exists every node of
#   100 replayed steps (--cuda-graph-trace=node); (2) mnist_ddp's default in fp32
#   and tf32 as a CUDA graph against the tuned PyTorch peer (tests/reference/pytorch_tuned_mnist.py: data
#   resident on the GPU, channels-last, cuDNN autotuning, the whole step as a CUDA graph where its PyTorch
#   can); (3) both at per-GPU batches 256 and 1024 (BENCH_GPU_BATCHES); (4) the paths behind a switch
#   (MNIST_DDP_CONV1=direct, MNIST_DDP_HEAD=fused, the fused pool undone with MNIST_DDP_POOL=composed,
#   MNIST_DDP_CONV2=direct and =3xtf32, and together; MNIST_DDP_BACKWARD=forked; MNIST_DDP_FC=epilogue) as graphs
#   against the default,
#   with their eager per-layer tables; (5) eager steps, bf16, all GPUs of the node, the eager per-layer table (CUDA events),
#   start-up with lazy and eager module loading, and PyTorch's DDP example
#   (tests/reference/pytorch_ddp_mnist.py). mnist_ddp runs BENCH_GPU_EPOCHS epochs (default 2; steady state is
#   epoch 2 onwards: epoch 1 holds the first capture and cuBLAS's warm-up), the profiles one.
# GPU memory is the most nvidia-smi saw in use above the level before each run (every allocation, CUDA's
# context and libraries' workspaces included, for both programs alike). Measures: docs/performance.md.
# BENCH_GPU_DATA: the shards (default MNIST_DATA); BENCH_GPU_PROGRAM: the trainer (default src/mnist_ddp);
# BENCH_GPU_ARGS: more options for each of its runs (tests/gpu/gpu-mock-bench.sh runs this script against the
# simulated CUDA runtime, on a few samples in small batches).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
MNIST_DDP=${BENCH_GPU_PROGRAM:-$MNIST_DDP}
MNIST_DATA=${BENCH_GPU_DATA:-$MNIST_DATA}
epochs=${BENCH_GPU_EPOCHS:-2}
strict=${BENCH_GPU_STRICT:-0}
ref=$abs_top_srcdir/tests/reference

# ---- pre-flight
echo "pre-flight: $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
  echo "driver supports CUDA $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
else
  echo "nvidia-smi: not found"
fi
# The libraries the binary loads, by file name (their versions), and any it cannot find.
ldd "$MNIST_DDP" >"$TMP/ldd" 2>&1 || true
grep -E 'libcudart|libcublas|libnccl' "$TMP/ldd" >"$TMP/ldd.cuda" || true
while read -r lib _ path _; do
  case $path in /*) echo "$lib -> $(readlink -f "$path")" ;; *) echo "$lib: not found" ;; esac
done <"$TMP/ldd.cuda"
if grep -q 'not found' "$TMP/ldd.cuda"; then
  [ "$strict" = 1 ] && fail "pre-flight: mnist_ddp cannot find a CUDA library (above)"
  echo "no CUDA library: nothing to benchmark"
  exit 0
fi
gpu_probe
if [ -n "$gpu_reason" ]; then
  [ "$strict" = 1 ] && fail "pre-flight: $gpu_reason"
  echo "no GPU: nothing to benchmark ($gpu_reason)"
  exit 0
fi
need_data
[ "$gpu_rc" -eq 0 ] || { cat "$TMP/probe.out" "$TMP/probe.err"; fail "--device cuda --epochs 0 exited with $gpu_rc"; }
cat "$TMP/probe.out" # mnist_ddp's start-up: each rank's GPU, the driver, runtime and NCCL it found
ngpu=$(gpu_count)
[ "$ngpu" -ge 1 ] || ngpu=1

# ---- GPU memory: a sampler beside each run (nothing where nvidia-smi is missing)
mem_start() {
  mem_pid=
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 100 >"$TMP/$1.mem" 2>/dev/null &
  mem_pid=$!
  sleep 0.3 # the level before the run: its first samples
}
mem_stop() {
  [ -n "$mem_pid" ] || return 0
  kill "$mem_pid" 2>/dev/null || true
  wait "$mem_pid" 2>/dev/null || true
}

# ---- mnist_ddp
runs=
# ddp NAME RANKS PRECISION GRAPH EPOCHS [OPTION...]: the run's metrics, log, wall clock and memory in $TMP/NAME.*
ddp() {
  name=$1 np=$2 prec=$3 graph=$4 ep=$5
  shift 5
  echo "bench: $name: $np GPU(s), --precision $prec --cuda-graph $graph --epochs $ep $*"
  mem_start "$name"
  t0=$(now)
  # shellcheck disable=SC2086 # BENCH_GPU_ARGS: several options
  run_np "$np" "$MNIST_DDP" --device cuda --precision "$prec" --cuda-graph "$graph" --data "$MNIST_DATA" \
    --epochs "$ep" --log-interval 100000 --metrics "$TMP/$name.json" ${BENCH_GPU_ARGS:-} "$@" >"$TMP/$name.log" 2>&1 ||
    { mem_stop; cat "$TMP/$name.log"; fail "$name"; }
  ms_since "$t0" >"$TMP/$name.wall"
  mem_stop
  grep -E '^(epoch [0-9]+:|all-reduce:|device work per step:|summary:)' "$TMP/$name.log" || true
  runs="$runs $name"
}

# ---- the PyTorch peers
peers=
# peer NAME SCRIPT ARGS...: a failure is printed, not fatal (a benchmark); its JSON line in $TMP/NAME.json
peer() {
  name=$1 script=$2
  shift 2
  [ "$have_peers" = 1 ] || return 0
  echo "bench: $name: $script $*"
  mem_start "$name"
  t0=$(now)
  if "$PYTHON3" "$ref/$script" "$@" >"$TMP/$name.json" 2>"$TMP/$name.err"; then
    ms_since "$t0" >"$TMP/$name.wall"
    cat "$TMP/$name.json"
    peers="$peers $name"
  else
    tail -n 20 "$TMP/$name.err"
    echo "note: the PyTorch peer failed: no row for $name"
  fi
  mem_stop
}
# BENCH_GPU_PEERS_DEVICE=cpu: both peers on the CPU for a few steps (the report's own test, without a GPU).
if [ "${BENCH_GPU_PEERS_DEVICE:-cuda}" = cpu ]; then
  fp32=cpu default=cpu tf32=cpu steps=4 have='import h5py, torch'
else
  fp32=cuda-fp32 default=cuda tf32=cuda-tf32 steps=0 have='import h5py, torch; assert torch.cuda.is_available()'
fi
have_peers=0
if "$PYTHON3" -c "$have" 2>/dev/null; then
  have_peers=1
else
  echo "note: $PYTHON3 has no CUDA-enabled PyTorch with h5py: no PyTorch peer rows"
fi

# The runs in order of value, so that a run cut short by a loan's end still holds what matters most.
# 1. Where a replayed step's time goes: --profile with graphs, stamp kernels between the phases (each one node
#    more; the unprofiled step's time is in 2).
ddp profile-graph 1 fp32 on 1 --profile
ddp profile-graph-tf32 1 tf32 on 1 --profile
# Where Nsight Systems exists: every node of 100 replayed steps (--cuda-graph-trace=node), kernels summed by name.
if command -v nsys >/dev/null 2>&1; then
  echo "bench: nsys-nodes: nsys profile --cuda-graph-trace=node, 100 steps of fp32"
  # shellcheck disable=SC2086 # BENCH_GPU_ARGS: several options
  if nsys profile --cuda-graph-trace=node --trace=cuda --force-overwrite=true -o "$TMP/nodes" "$MNIST_DDP" \
    --device cuda --data "$MNIST_DATA" --epochs 1 --max-steps 100 --log-interval 100000 ${BENCH_GPU_ARGS:-} \
    >"$TMP/nsys.log" 2>&1 &&
    nsys stats --report cuda_gpu_kern_sum --format csv "$TMP/nodes.nsys-rep" >"$TMP/nsys.csv" 2>>"$TMP/nsys.log"; then
    head -n 45 "$TMP/nsys.csv"
  else
    tail -n 20 "$TMP/nsys.log"
    echo "note: nsys failed: no per-node rows"
  fi
else
  echo "note: nsys not found: no per-node trace (the stamps above stand in)"
fi
# 2. The default against the tuned peer, fp32 and tf32.
ddp fp32-graph 1 fp32 on "$epochs"
ddp tf32-graph 1 tf32 on "$epochs"
peer tuned-fp32 pytorch_tuned_mnist.py "$MNIST_DATA" "$epochs" "$fp32" "$steps"
peer tuned-tf32 pytorch_tuned_mnist.py "$MNIST_DATA" "$epochs" "$tf32" "$steps"
# 3. The batches throughput users choose (per GPU; BENCH_GPU_BATCHES), both programs.
for b in ${BENCH_GPU_BATCHES:-256 1024}; do
  ddp "fp32-graph-b$b" 1 fp32 on "$epochs" --batch-size "$b"
  ddp "tf32-graph-b$b" 1 tf32 on "$epochs" --batch-size "$b"
  TUNED_BATCH=$b peer "tuned-fp32-b$b" pytorch_tuned_mnist.py "$MNIST_DATA" "$epochs" "$fp32" "$steps"
  TUNED_BATCH=$b peer "tuned-tf32-b$b" pytorch_tuned_mnist.py "$MNIST_DATA" "$epochs" "$tf32" "$steps"
done
# 4. Paths behind a switch until this report shows them faster (docs/gpu.md), each against the default, which
# has MNIST_DDP_POOL=fused since an H200 measured it faster: net's conv1 as one kernel.
MNIST_DDP_CONV1=direct
export MNIST_DDP_CONV1
ddp fp32-graph-conv1direct 1 fp32 on "$epochs"
ddp tf32-graph-conv1direct 1 tf32 on "$epochs"
ddp profile-conv1direct 1 fp32 off 1 --profile
unset MNIST_DDP_CONV1
# net's training head (fc1's bias to its output and bias gradients) as one kernel; then both switches.
MNIST_DDP_HEAD=fused
export MNIST_DDP_HEAD
ddp fp32-graph-headfused 1 fp32 on "$epochs"
ddp tf32-graph-headfused 1 tf32 on "$epochs"
ddp profile-headfused 1 fp32 off 1 --profile
MNIST_DDP_CONV1=direct ddp fp32-graph-both 1 fp32 on "$epochs"
unset MNIST_DDP_HEAD
# The default's fused pool against the kernels it replaces (conv2's pool, dropout1, the bias gradient).
MNIST_DDP_POOL=composed
export MNIST_DDP_POOL
ddp fp32-graph-poolcomposed 1 fp32 on "$epochs"
ddp tf32-graph-poolcomposed 1 tf32 on "$epochs"
ddp profile-poolcomposed 1 fp32 off 1 --profile
unset MNIST_DDP_POOL
# conv2 with its pool as three kernels without a column buffer; then all four switches.
MNIST_DDP_CONV2=direct
export MNIST_DDP_CONV2
ddp fp32-graph-conv2direct 1 fp32 on "$epochs"
ddp tf32-graph-conv2direct 1 tf32 on "$epochs" # its forward on TF32 tensor cores
ddp profile-conv2direct 1 fp32 off 1 --profile
MNIST_DDP_CONV1=direct MNIST_DDP_HEAD=fused ddp fp32-graph-all4 1 fp32 on "$epochs"
MNIST_DDP_CONV1=direct MNIST_DDP_HEAD=fused ddp tf32-graph-all4 1 tf32 on "$epochs"
# The same with the forward and input gradient in 3xTF32 on tensor cores (fp32's accuracy).
MNIST_DDP_CONV2=3xtf32 ddp fp32-graph-3xtf32 1 fp32 on "$epochs"
MNIST_DDP_CONV2=3xtf32 MNIST_DDP_CONV1=direct MNIST_DDP_HEAD=fused ddp fp32-graph-all3x 1 fp32 on "$epochs"
unset MNIST_DDP_CONV2
# The fc layers' weight gradients on a second stream, beside their input gradients (a fork and a join per layer).
MNIST_DDP_BACKWARD=forked ddp fp32-graph-forked 1 fp32 on "$epochs"
MNIST_DDP_BACKWARD=forked ddp tf32-graph-forked 1 tf32 on "$epochs"
# The fc layers' forward as one cuBLASLt matmul each, the bias and fc1's ReLU in its epilogue (3 kernels fewer).
MNIST_DDP_FC=epilogue ddp fp32-graph-epilogue 1 fp32 on "$epochs"
MNIST_DDP_FC=epilogue ddp tf32-graph-epilogue 1 tf32 on "$epochs"
# 5. The rest: eager steps, bf16, all GPUs of the node, the eager per-layer table (CUDA events), start-up, the
# DDP example.
ddp fp32-eager 1 fp32 off "$epochs"
ddp tf32-eager 1 tf32 off "$epochs"
ddp bf16-graph 1 bf16 on "$epochs"
if [ "$ngpu" -ge 2 ]; then
  ddp "fp32-graph-${ngpu}gpu" "$ngpu" fp32 on "$epochs"
else
  echo "note: 1 GPU visible: no multi-GPU row"
fi
ddp profile 1 fp32 off 1 --profile
# Start-up: CUDA loads its modules when first used (lazy, CUDA 12.2 onwards' default) or all at start.
for mode in LAZY EAGER; do
  CUDA_MODULE_LOADING=$mode
  export CUDA_MODULE_LOADING
  ddp "startup-$mode" 1 fp32 on 1 --max-steps 20
done
unset CUDA_MODULE_LOADING
peer example-fp32 pytorch_ddp_mnist.py "$MNIST_DATA" 1 "$epochs" "$steps" "$fp32"
peer example-default pytorch_ddp_mnist.py "$MNIST_DATA" 1 "$epochs" "$steps" "$default"
[ "$ngpu" -lt 2 ] || peer "example-fp32-${ngpu}gpu" pytorch_ddp_mnist.py "$MNIST_DATA" "$ngpu" "$epochs" "$steps" "$fp32"

# shellcheck disable=SC2086
"$PYTHON3" "$abs_top_srcdir/tests/bench/bench_gpu_report.py" "$TMP" $runs -- $peers
