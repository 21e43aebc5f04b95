"""The tables of tests/bench/bench-gpu.sh from its runs' files (measures: docs/performance.md).
Usage: bench_gpu_report.py DIR RUN... -- PEER...: for each mnist_ddp RUN, DIR/RUN.json (metrics), .log, .wall
(milliseconds) and .mem (nvidia-smi samples, "index, MiB", optional); for each PEER, DIR/PEER.json (the peer's
one JSON line), .wall and .mem. Run names: PREC-GRAPH[-SWITCH|-Ngpu|-bBATCH], profile[-...], startup-MODE; peers
NAME[-bBATCH]."""
import json
import os
import re
import sys


def wall(d, n):
    return int(open(f"{d}/{n}.wall").read()) / 1e3


def gpu_mib(d, n):
    """The most memory nvidia-smi saw in use on one GPU above that GPU's first sample; None without samples."""
    path, first, peak = f"{d}/{n}.mem", {}, {}
    if not os.path.exists(path):
        return None
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            first.setdefault(parts[0], int(parts[1]))
            peak[parts[0]] = max(peak.get(parts[0], 0), int(parts[1]))
    return max((peak[i] - first[i] for i in peak), default=None)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


class Run:
    """One mnist_ddp run: its epochs, summary, and the steady state (epochs 2 onwards when there are two)."""

    def __init__(self, d, name):
        recs = [json.loads(line) for line in open(f"{d}/{name}.json") if line.strip()]
        self.name, self.wall, self.mem = name, wall(d, name), gpu_mib(d, name)
        self.epochs = [r for r in recs if r["type"] == "epoch"]
        self.s = [r for r in recs if r["type"] == "summary"][-1]
        log = self.log = open(f"{d}/{name}.log").read()
        self.params = int(re.search(r"model \S+: (\d+) parameters", log).group(1))
        self.samples = int(re.search(r"(\d+) training samples", log).group(1))
        steady = self.epochs[1:] or self.epochs
        self.steady_ips = sum(e["images_per_s"] for e in steady) / len(steady) if steady else 0.0
        self.epoch1_ips = self.epochs[0]["images_per_s"] if self.epochs else 0.0
        parts = name.split("-")
        self.prec, self.graph = parts[0], parts[1] if len(parts) > 1 else "-"

    def nodes(self):
        return self.s["kernels_per_step"] + self.s["gemms_per_step"]


def speed_table(rows):
    print(f"\nmnist_ddp, default model ({rows[0].params} parameters), {len(rows[0].epochs)} epochs per run; steady: "
          "epochs 2 onwards")
    head = ("run", "GPUs", "steady img/s", "s/epoch", "epoch 1 img/s", "start-up s", "wall s", "acc %", "nodes/st",
            "kern/st", "gemm/st", "wait/st", "GPU MiB", "model MiB")
    widths = (25, 5, 13, 9, 14, 11, 8, 7, 9, 8, 8, 8, 8, 10)
    print("".join(f"{h:<{w}}" if i == 0 else f"{h:>{w}}" for i, (h, w) in enumerate(zip(head, widths))))
    for r in rows:
        s = r.s
        cells = (r.name, s["world"], f"{r.steady_ips:.0f}", fmt(r.samples / r.steady_ips if r.steady_ips else None,
                 ".3f"), f"{r.epoch1_ips:.0f}", f"{s['startup_s']:.2f}", f"{r.wall:.1f}",
                 f"{100 * s['test_accuracy']:.2f}", f"{r.nodes():.1f}", f"{s['kernels_per_step']:.1f}",
                 f"{s['gemms_per_step']:.1f}", f"{s['host_waits_per_step']:.3f}", fmt(r.mem, "d"),
                 fmt(s.get("model_mib"), ".1f"))
        print("".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, widths))))
    print("s/epoch: training seconds per epoch at the steady rate; nodes/st: kernel launches + cuBLAS calls per "
          "training step (cuBLAS's own kernels not counted); wait/st: host waits per step; GPU MiB: the most "
          "nvidia-smi saw in use on one GPU above its level before the run; model MiB: what the model itself holds")


def switch_lines(rows):
    """Each path behind a switch (a run named BASE-SWITCH) against its base run: the figure that sets the default."""
    by = {r.name: r for r in rows}
    for r in rows:
        base = by.get(r.name.rsplit("-", 1)[0])
        if base and base is not r and r.name.count("-") == 2 and base.steady_ips:
            print(f"{r.name}: {r.steady_ips / base.steady_ips:.3f}x the steady images/s of {base.name}, "
                  f"{r.nodes():.0f} nodes per step against {base.nodes():.0f}, the model's "
                  f"{fmt(r.s.get('model_mib'), '.1f')} MiB against {fmt(base.s.get('model_mib'), '.1f')}")


def allreduce_table(rows):
    many = [r for r in rows if r.s["world"] > 1]
    if not many:
        return
    print("\ngradient all-reduce (one isolated all-reduce of all gradients: best of 3, slowest rank; busbw = algbw x "
          "2 (n - 1) / n as nccl-tests; exposed: per step, after backward; hidden: 1 - exposed / blocking)")
    print(f"{'run':<22}{'GPUs':>5}{'allred ms':>11}{'algbw GB/s':>12}{'busbw GB/s':>12}{'exposed ms':>12}{'hidden':>8}")
    for r in many:
        s, n = r.s, r.s["world"]
        t = s["allreduce_blocking_ms"] / 1e3
        algbw = 4 * r.params / t / 1e9 if t > 0 else None
        busbw = algbw * 2 * (n - 1) / n if algbw else None
        print(f"{r.name:<22}{n:>5}{s['allreduce_blocking_ms']:>11.3f}{fmt(algbw, '.1f'):>12}{fmt(busbw, '.1f'):>12}"
              f"{s['allreduce_exposed_ms']:>12.3f}{100 * s['allreduce_hidden']:>7.0f}%")


TITLES = {
    "cuda-events": "where a step goes (fp32, eager, --profile --cuda-graph off: CUDA events around each phase",
    "graph-stamps": "where a replayed step goes (--profile with graphs: a stamp kernel after each phase, one node "
                    "more each",
}


def profile_table(runs, clock):
    """µs per step of each training phase, one column per run profiled with clock (the first is the reference)."""
    runs = [r for r in runs if r.s.get("profile", {}).get("clock") == clock]
    if not runs:
        return
    steps = runs[0].s["steps"]
    print(f"\n{TITLES.get(clock, clock)}; each step held until queued and run back to back; {steps} steps; "
          "µs per step, mean over ranks; share of the first run's phases)")
    print(f"  {'phase':<28}" + "".join(f"{r.name:>22}" for r in runs) + f"{'share':>8}")
    first = runs[0].s["profile"]
    cols = [{p["phase"]: p["mean_s"] / r.s["steps"] for p in r.s["profile"]["phases"]} for r in runs]
    # The first run's phases in its order, then those only a switch has (a fused kernel's own phase).
    phases = [p for p in first["phases"] if p["training"]]
    seen = {p["phase"] for p in first["phases"]}
    for r in runs[1:]:
        for p in r.s["profile"]["phases"]:
            if p["training"] and p["phase"] not in seen:
                phases.append(dict(p, mean_s=None))
                seen.add(p["phase"])
    whole = first["share_of_s"]  # what the trainer's own table takes shares of (base/profile.c)
    for p in phases:
        share = 100 * p["mean_s"] / whole if p["mean_s"] is not None and whole else None
        cells = "".join(f"{fmt(1e6 * c[p['phase']] if p['phase'] in c else None, '.1f'):>22}" for c in cols)
        print(f"  {p['phase']:<28}{cells}{fmt(share, '.1f'):>7}{'%' if share is not None else ''}")


def stamp_cost_lines(runs, rows):
    """Each profiled replayed step against the same step unprofiled: what the stamps add."""
    by = {r.name: r for r in rows}
    for r in runs:
        if r.s.get("profile", {}).get("clock") != "graph-stamps":
            continue
        parts = r.name.split("-")  # profile-graph[-PREC]
        plain = by.get(f"{parts[2] if len(parts) > 2 else 'fp32'}-graph")
        if not plain or not plain.steady_ips or not plain.epochs:
            continue
        phases = sum(p["mean_s"] for p in r.s["profile"]["phases"] if p["training"]) / r.s["steps"]
        step = plain.samples / plain.steady_ips / (plain.s["steps"] / len(plain.epochs))
        node = re.search(r"an empty kernel costs ([0-9.]+) us a node", r.log)
        print(f"{r.name}: phases {1e6 * phases:.1f} µs per step with {r.nodes() - plain.nodes():.0f} nodes more (the "
              f"stamps, the hold); {plain.name} steady {1e6 * step:.1f} µs per step without them; an empty kernel "
              f"{node.group(1) if node else '-'} µs a node")


def startup_table(rows):
    if not rows:
        return
    print("\nstart-up by CUDA module loading (CUDA_MODULE_LOADING; 20 steps, fp32, graph)")
    for r in rows:
        print(f"  {r.name.split('-', 1)[1]:<8} start-up {r.s['startup_s']:.2f} s, wall {r.wall:.1f} s, "
              f"GPU {fmt(r.mem, 'd')} MiB")


def peer_table(d, peers, rows):
    if not peers:
        return
    by = {r.name: r for r in rows}
    print("\nthe PyTorch peers in the same run, against mnist_ddp on as many GPUs in the matching precision "
          "(example: PyTorch's DDP example, images/s over all epochs; tuned: one process, data on the GPU, "
          "channels-last, cuDNN autotuning, CUDA graphs where it can; steady images/s)")
    print(f"{'peer':<22}{'torch':>14}{'mode':>20}{'img/s':>10}{'wall s':>8}{'acc %':>7}{'GPU MiB':>9}   mnist_ddp against it")
    for n in peers:
        p = json.loads(open(f"{d}/{n}.json").read().strip().splitlines()[-1])
        world = p.get("world", 1)
        prec = "tf32" if n.startswith("tuned-tf32") or n.startswith("example-default") else "fp32"
        batch = re.search(r"-b\d+$", n)
        ours = by.get(f"{prec}-graph" + (f"-{world}gpu" if world > 1 else "") + (batch.group(0) if batch else ""))
        tuned = n.startswith("tuned")
        ips = p["steady_images_per_s"] if tuned else p["images_per_s"]
        mine = (ours.steady_ips if tuned else ours.s["images_per_s"]) if ours else None
        vs = f"   {mine / ips:.2f}x images/s, {wall(d, n) / ours.wall:.2f}x wall ({ours.name})" if ours and ips else ""
        print(f"{n:<22}{p['torch']:>14}{p.get('mode', 'ddp-' + str(world)):>20}{ips:>10.0f}{wall(d, n):>8.1f}"
              f"{100 * p['test_accuracy']:>7.2f}{fmt(gpu_mib(d, n), 'd'):>9}{vs}")
    print("wall s: the whole process, start-up and evaluation included; example-default: PyTorch's defaults "
          "(cuDNN in TF32), against mnist_ddp tf32")


def main():
    d, args = sys.argv[1], sys.argv[2:]
    names, peers = args[:args.index("--")], args[args.index("--") + 1:]
    runs = [Run(d, n) for n in names]
    speed = [r for r in runs if not r.name.startswith(("profile", "startup-"))]
    speed_table(speed)
    switch_lines(speed)
    allreduce_table(speed)
    profiled = sorted((r for r in runs if r.name.startswith("profile")), key=lambda r: r.name != "profile")
    profile_table(profiled, "graph-stamps")
    stamp_cost_lines(profiled, speed)
    profile_table(profiled, "cuda-events")
    startup_table([r for r in runs if r.name.startswith("startup-")])
    peer_table(d, peers, speed)


if __name__ == "__main__":
    main()
