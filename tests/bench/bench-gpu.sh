#!/bin/sh
# GPU benchmark (not a test: it prints figures, asserts nothing): one epoch of the default model on 1 GPU
# in each --precision, and on all GPUs of the node in fp32, then the PyTorch peer (its DDP example on
# NCCL, tests/reference/pytorch_ddp_mnist.py) on the same shards in the same run where Python has a
# CUDA-enabled PyTorch and h5py. Per run: training images/s, epoch and training seconds, whole-process
# wall clock, accuracy, kernel launches, GEMMs and host waits per training step (counted by the backend's
# own launch wrappers and waits: the metrics summary), and for more than one GPU the gradient all-reduce:
# blocking time, bus bandwidth as nccl-tests computes it for all-reduce (busbw = algbw * 2 (n - 1) / n,
# algbw = bytes / time, bytes = 4 x parameters), time exposed per step and the share hidden behind
# backward. Without a usable GPU it says so and succeeds. Run: make bench-gpu
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e

gpu_probe
if [ -n "$gpu_reason" ]; then
  echo "no GPU: nothing to benchmark ($gpu_reason)"
  exit 0
fi
need_data
[ "$gpu_rc" -eq 0 ] || { cat "$TMP/probe.out" "$TMP/probe.err"; fail "--device cuda --epochs 0 exited with $gpu_rc"; }

ngpu=$(gpu_count)
[ "$ngpu" -ge 1 ] || ngpu=1
grep -A1 CUDA_VISIBLE_DEVICES "$TMP/probe.out" || true

runs=
bench() { # bench NAME RANKS PRECISION
  echo "bench: $1: $2 GPU(s), --precision $3"
  t0=$(now)
  run_np "$2" "$MNIST_DDP" --device cuda --precision "$3" --data "$MNIST_DATA" --epochs 1 --log-interval 1000 \
    --metrics "$TMP/$1.json" >"$TMP/$1.log" 2>&1 || { cat "$TMP/$1.log"; fail "$1"; }
  ms_since "$t0" >"$TMP/$1.wall"
  grep -E '^(all-reduce|summary|device work per step):' "$TMP/$1.log" || true
  runs="$runs $1"
}
peers=
peer() { # peer NAME RANKS DEVICE: the PyTorch peer; a failure is printed, not fatal (a benchmark)
  echo "bench: $1: PyTorch peer, $2 GPU(s), $3"
  t0=$(now)
  if "$PYTHON3" "$abs_top_srcdir/tests/reference/pytorch_ddp_mnist.py" "$MNIST_DATA" "$2" 1 0 "$3" >"$TMP/$1.json" \
       2>"$TMP/$1.err"; then
    ms_since "$t0" >"$TMP/$1.wall"
    cat "$TMP/$1.json"
    peers="$peers $1"
  else
    tail -n 20 "$TMP/$1.err"
    echo "note: the PyTorch peer failed: no row for $1"
  fi
}
for p in fp32 tf32 bf16; do
  bench "1gpu-$p" 1 "$p"
done
if [ "$ngpu" -ge 2 ]; then
  bench "${ngpu}gpu-fp32" "$ngpu" fp32
else
  echo "note: 1 GPU visible: no multi-GPU row"
fi

if "$PYTHON3" -c 'import h5py, torch; assert torch.cuda.is_available()' 2>/dev/null; then
  peer peer-1gpu-fp32 1 cuda-fp32
  peer peer-1gpu-default 1 cuda
  [ "$ngpu" -lt 2 ] || peer "peer-${ngpu}gpu-fp32" "$ngpu" cuda-fp32
else
  echo "note: $PYTHON3 has no CUDA-enabled PyTorch with h5py: no PyTorch peer rows"
fi

# shellcheck disable=SC2086
"$PYTHON3" - "$TMP" $runs -- $peers <<'PY'
import json, re, sys
d, args = sys.argv[1], sys.argv[2:]
names, peers = args[:args.index("--")], args[args.index("--") + 1:]
wall = lambda n: int(open(f"{d}/{n}.wall").read()) / 1e3
rows = []
for n in names:
    recs = [json.loads(l) for l in open(f"{d}/{n}.json") if l.strip()]
    s = [r for r in recs if r["type"] == "summary"][-1]
    e = [r for r in recs if r["type"] == "epoch"][-1]
    params = int(re.search(r"model \S+: (\d+) parameters", open(f"{d}/{n}.log").read()).group(1))
    world, t = s["world"], s["allreduce_blocking_ms"] / 1e3
    algbw = 4 * params / t / 1e9 if t > 0 else None  # GB/s
    busbw = algbw * 2 * (world - 1) / world if algbw else None
    rows.append((n, world, n.split("-")[-1], s["images_per_s"], e["epoch_s"], s["train_s"], 100 * s["test_accuracy"],
                 s["allreduce_blocking_ms"] if world > 1 else None, algbw, busbw,
                 s["allreduce_exposed_ms"] if world > 1 else None, s["allreduce_hidden"] if world > 1 else None,
                 s["kernels_per_step"], s["gemms_per_step"], s["host_waits_per_step"], params))
print(f"\none epoch, default model ({rows[0][-1]} parameters, {4 * rows[0][-1] / 1e6:.2f} MB of gradients)")
head = ("run", "GPUs", "prec", "images/s", "epoch s", "train s", "wall s", "acc %", "allred ms", "algbw GB/s", "busbw GB/s",
        "exposed ms", "hidden", "kern/st", "gemm/st", "wait/st")
print(f"{head[0]:<12}{head[1]:>5}{head[2]:>6}{head[3]:>11}{head[4]:>9}{head[5]:>9}{head[6]:>8}{head[7]:>8}{head[8]:>11}"
      f"{head[9]:>12}{head[10]:>12}{head[11]:>12}{head[12]:>8}{head[13]:>9}{head[14]:>9}{head[15]:>9}")
f = lambda v, fmt: "-" if v is None else format(v, fmt)
for r in rows:
    hidden = "-" if r[11] is None else f"{100 * r[11]:.0f}%"
    print(f"{r[0]:<12}{r[1]:>5}{r[2]:>6}{r[3]:>11.0f}{r[4]:>9.2f}{r[5]:>9.2f}{wall(r[0]):>8.1f}{r[6]:>8.2f}{f(r[7], '.3f'):>11}"
          f"{f(r[8], '.1f'):>12}{f(r[9], '.1f'):>12}{f(r[10], '.3f'):>12}{hidden:>8}{r[12]:>9.1f}{r[13]:>9.1f}"
          f"{r[14]:>9.3f}")
if peers:
    print(f"\nthe PyTorch peer in the same run (DDP on NCCL; default: cuDNN convolutions in TF32), against "
          f"mnist_ddp on as many GPUs")
    print(f"{'run':<20}{'torch':>14}{'images/s':>11}{'epoch s':>9}{'wall s':>8}{'acc %':>8}"
          "   mnist_ddp's images/s and wall clock against the peer's")
    for n in peers:
        p = json.loads(open(f"{d}/{n}.json").read().strip().splitlines()[-1])
        ours = [r for r in rows if r[1] == p["world"] and r[2] == ("fp32" if n.endswith("fp32") else "tf32")]
        vs = (f"   {ours[0][3] / p['images_per_s']:.2f}x images/s, {wall(n) / wall(ours[0][0]):.2f}x wall ({ours[0][0]})"
              if ours else "")
        print(f"{n:<20}{p['torch']:>14}{p['images_per_s']:>11.0f}{p['train_s']:>9.2f}{wall(n):>8.1f}"
              f"{100 * p['test_accuracy']:>8.2f}{vs}")
print("wall s: the whole process, start-up and evaluation included")
print("allred: one isolated all-reduce of all gradients (best of 3, slowest rank); busbw = algbw x 2 (n - 1) / n "
      "(nccl-tests); exposed: per step, after backward; hidden: 1 - exposed / blocking; kern/gemm/wait per st: "
      "kernel launches, cuBLAS GEMMs and host waits per training step")
PY
