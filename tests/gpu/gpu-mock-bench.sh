#!/bin/sh
# The GPU performance report (tests/bench/bench-gpu.sh and tests/bench/bench_gpu_report.py: make gpu-report,
# the kit's ./run --perf) end to end against the simulated CUDA runtime (tests/gpu/gpu_mock_train), so that
# the rare session with a GPU never loses it to a script error. No GPU needed; the figures mean nothing here
# (the simulation times nothing), the structure is checked: strict pre-flight passes, every mnist_ddp run
# (fp32, tf32 and bf16; graph and eager) gives a row with the same nodes per step (the default: 36, the graph's 35
# and the kernel writing the step's lr and key before it, with
# MNIST_DDP_POOL=fused), five fewer with MNIST_DDP_CONV1=direct (conv1's forward one kernel, its gradients one
# reduction), fifteen fewer with MNIST_DDP_HEAD=fused (net's training head one kernel), twenty with both, five
# more with MNIST_DDP_POOL=composed (conv2's pool and dropout1 two kernels, their backward and conv2's bias
# gradient four, conv1's ReLU backward its own), four fewer with MNIST_DDP_CONV2=direct (conv2 and its pool
# three kernels without a column buffer, the model smaller by that and conv2's output: the only switch that
# shrinks it; in fp32 and tf32, and =3xtf32), twenty-four with the other two as well, three fewer with
# MNIST_DDP_FC=epilogue (fc1's bias fill and ReLU and fc2's bias fill in cuBLASLt's epilogues), the per-layer table and
# the start-up rows are there, and the PyTorch peers' rows where BENCH_GPU_PEERS_DEVICE=cpu runs both peers
# on the CPU for a few steps. The runs come in order of value (the replayed step's phases, the default against the
# tuned peer, the larger batches with their peers); the replayed step's table has its fp32 and tf32 columns. Where the real mnist_ddp finds no GPU, strict pre-flight fails and says why.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
P=$abs_top_builddir/tests/gpu/gpu_mock_train
[ -x "$P" ] || skip "tests/gpu/gpu_mock_train not built (GPU build only)"
need_data
"$PYTHON3" -c 'import torch' 2>/dev/null || fail "PyTorch is needed for the peers' rows (apt-get install python3-torch)"
# 64 samples (the probe's default batch), batches of 8: 8 steps per epoch.
small_mnist "$TMP/small" 64 16
# A stand-in for Nsight Systems: "profile [--opt=value]... -o OUT CMD..." (tracing graphs node by node) runs CMD and
# writes OUT.nsys-rep; "stats" prints a summary in nsys's CSV form.
mkdir "$TMP/bin"
cat >"$TMP/bin/nsys" <<'SH'
#!/bin/sh
case $1 in
  profile) shift
    case " $* " in *" --cuda-graph-trace=node "*) ;; *) exit 2 ;; esac # each node of a graph, not the graph whole
    while [ "${1#--}" != "$1" ]; do shift; done
    [ "$1" = -o ] || exit 2
    out=$2; shift 2
    "$@" && : >"$out.nsys-rep" ;;
  stats) [ -e "${*##* }" ] || exit 2
    echo 'Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name'
    echo '50.0,1000,10,100.0,100.0,90,110,5.0,k_stand_in' ;;
  *) exit 2 ;;
esac
SH
chmod +x "$TMP/bin/nsys"

PATH="$TMP/bin:$PATH" BENCH_GPU_PROGRAM=$P BENCH_GPU_DATA=$TMP/small BENCH_GPU_EPOCHS=2 BENCH_GPU_STRICT=1 MOCK_POLICY=compute \
  BENCH_GPU_ARGS="--batch-size 8 --test-batch-size 16" BENCH_GPU_PEERS_DEVICE=cpu BENCH_GPU_BATCHES="16 32" \
  sh "$abs_top_srcdir/tests/bench/bench-gpu.sh" >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "bench-gpu.sh failed"; }
cat "$TMP/out"
! grep -q Traceback "$TMP/out" || fail "the report's Python failed"
"$PYTHON3" - "$TMP/out" <<'PY' || fail "the report lacks a table or a row (above)"
import re, sys
out = open(sys.argv[1]).read()
table = out[out.index("\nrun "):]
rows = {m.group(1): m.group(0).split() for m in re.finditer(r"^((?:fp32|tf32|bf16)-(?:graph|eager))\s.*$", table, re.M)}
want = {"fp32-graph", "fp32-eager", "tf32-graph", "tf32-eager", "bf16-graph"}
assert set(rows) == want, sorted(rows)
nodes = {r[8] for r in rows.values()}  # nodes/st: the same work, replayed or not
assert len(nodes) == 1 and float(next(iter(nodes))) > 0, rows
# conv1 direct: forward, im2col + GEMM + bias pass -> 1 kernel; backward, sum_add (2) + im2col + GEMM -> 1 (its
# second pass in the reduction's last block)
for prec in ("fp32", "tf32"):
    direct = re.search(rf"^{prec}-graph-conv1direct\s.*$", table, re.M)
    assert direct and float(direct.group(0).split()[8]) == float(next(iter(nodes))) - 5, (direct, nodes)
for prec in ("fp32", "tf32"):
    line = re.search(rf"^{prec}-graph-conv1direct: [0-9.]+x the steady images/s of {prec}-graph, (\d+) nodes per "
                     r"step against (\d+), the model's ([0-9.]+) MiB against ([0-9.]+)$", out, re.M)
    assert line and int(line.group(2)) - int(line.group(1)) == 5, f"no line comparing {prec}-graph-conv1direct"
# the head as one kernel: fc1's bias fill and ReLU, dropout, fc2's fill + GEMM, loss (3), fc2's GEMMs (2) and
# sum_add (2), dropout and ReLU backward, fc1's sum_add (2) -> 1 kernel (15 fewer); with conv1 direct, 20 fewer.
# the pool composed (the default fuses it): forward, pool and flatten_dropout for the one kernel (1 more);
# backward, dropout_unflatten, the pool's backward and conv2's bias sum (2) for the one reduction (3 more),
# col2im and relu_backward for col2im with the ReLU (1 more): 5 more. conv2 direct: forward, im2col + GEMM +
# the fused pool -> 1 kernel; backward, the fused pool's reduction, the GEMMs (2) and col2im -> 2 kernels: 4
# fewer; with the other two, 24. conv2 direct: neither conv2's output nor its column buffer in the model
# (conv1's columns are smaller)
for name, fewer in (("fp32-graph-headfused", 15), ("tf32-graph-headfused", 15), ("fp32-graph-both", 20),
                    ("fp32-graph-poolcomposed", -5), ("tf32-graph-poolcomposed", -5),
                    ("fp32-graph-conv2direct", 4), ("tf32-graph-conv2direct", 4), ("fp32-graph-all4", 24),
                    ("tf32-graph-all4", 24), ("fp32-graph-3xtf32", 4), ("fp32-graph-all3x", 24),
                    ("fp32-graph-forked", 0), ("tf32-graph-forked", 0), ("fp32-graph-epilogue", 3),
                    ("tf32-graph-epilogue", 3)):
    line = re.search(rf"^{name}: [0-9.]+x the steady images/s of {name.rsplit('-', 1)[0]}, (\d+) nodes per step "
                     r"against (\d+), the model's ([0-9.]+) MiB against ([0-9.]+)$", out, re.M)
    assert line and int(line.group(2)) - int(line.group(1)) == fewer, f"{name}: {line and line.group(0)}"
    smaller = float(line.group(3)) < float(line.group(4))
    assert smaller == any(k in name for k in ("conv2direct", "all4", "3xtf32", "all3x")), f"{name}: {line.group(0)}"
assert float(next(iter(nodes))) == 36, f"the default's nodes per step: {nodes}"
assert re.search(r"^  conv1 backward( +[0-9.]+){5} +[0-9.]+%$", out, re.M), "no per-layer row for every switch"
assert re.search(r"^  head +- +- +[0-9.]+ +- +- +-$", out, re.M), "no per-layer row for the fused head"
assert re.search(r"^  conv-pool weight gradient +- +- +- +- +[0-9.]+ +-$", out, re.M), "conv2 direct's weight gradient apart"
assert re.search(r"^  LAZY +start-up [0-9.]+ s", out, re.M) and re.search(r"^  EAGER +start-up", out, re.M)
for peer in ("example-fp32", "example-default", "tuned-fp32", "tuned-tf32"):
    assert re.search(rf"^{peer} .*x images/s", out, re.M), f"no row for the peer {peer}"
# In order of value: the replayed step's phases, the default against the tuned peer, the batches, then the rest.
order = re.findall(r"^bench: (\S+):", out, re.M)
first = ["profile-graph", "profile-graph-tf32", "nsys-nodes", "fp32-graph", "tf32-graph", "tuned-fp32", "tuned-tf32",
         "fp32-graph-b16", "tf32-graph-b16", "tuned-fp32-b16", "tuned-tf32-b16", "fp32-graph-b32"]
assert order[:len(first)] == first, order
# The batches: both programs, each peer against mnist_ddp at its batch.
for b in (16, 32):
    for prec in ("fp32", "tf32"):
        assert re.search(rf"^{prec}-graph-b{b}\s", table, re.M), f"no row for {prec}-graph-b{b}"
        assert re.search(rf"^bench: {prec}-graph-b{b}: .* --batch-size {b}$", out, re.M), f"{prec}-graph-b{b}'s batch"
        assert re.search(rf"^tuned-{prec}-b{b} .*x images/s.*\({prec}-graph-b{b}\)$", out, re.M), f"tuned-{prec}-b{b}"
        peer = re.search(rf"^bench: tuned-{prec}-b{b}: .*\n(.*)$", out, re.M)
        assert peer and f'"batch": {b},' in peer.group(1), f"tuned-{prec}-b{b} did not train at batch {b}"
# Where nsys exists (here a stand-in), its kernel summary of the replayed steps' nodes.
assert re.search(r"^Time \(%\),Total Time \(ns\),Instances,.*,Name\n50\.0,.*,k_stand_in$", out, re.M), "no nsys rows"
# The replayed step's phases (stamps): a column each for fp32 and tf32, and what the stamps cost.
assert "where a replayed step goes (--profile with graphs" in out, "no table of the replayed step's phases"
assert re.search(r"^  optimizer +[0-9.]+ +[0-9.]+ +[0-9.]+%$", out[out.index("where a replayed"):], re.M)
for prec in ("", "-tf32"):
    assert re.search(rf"^profile-graph{prec}: phases [0-9.]+ µs per step with [1-9][0-9]* nodes more \(the stamps, "
                     rf"the hold\); {prec[1:] or 'fp32'}-graph steady [0-9.]+ µs per step without them; an empty kernel "
                     r"[0-9.]+ µs a node$", out, re.M), prec
PY

# Strict: where mnist_ddp finds no GPU, the pre-flight fails with the reason; not strict, it succeeds.
gpu_probe
if [ -n "$gpu_reason" ]; then
  set +e
  BENCH_GPU_DATA=$TMP/small BENCH_GPU_STRICT=1 sh "$abs_top_srcdir/tests/bench/bench-gpu.sh" >"$TMP/strict" 2>&1
  rc=$?
  set -e
  [ "$rc" -ne 0 ] || fail "strict pre-flight passed without a GPU"
  grep -q '^FAIL: pre-flight: .*no usable GPU' "$TMP/strict" || { cat "$TMP/strict"; fail "no reason from the pre-flight"; }
  BENCH_GPU_DATA=$TMP/small sh "$abs_top_srcdir/tests/bench/bench-gpu.sh" >"$TMP/lax" 2>&1 ||
    { cat "$TMP/lax"; fail "make bench-gpu failed without a GPU"; }
  grep -q '^no GPU: nothing to benchmark' "$TMP/lax" || { cat "$TMP/lax"; fail "make bench-gpu did not say why"; }
fi
echo "ok: the report's tables and rows; strict pre-flight fails without a GPU"
