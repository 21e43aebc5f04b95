#!/usr/bin/env python3
"""Replays a short mnist_ddp run in PyTorch from what DDP promises, and compares the outcome.

Usage: replay_ddp.py WORLD INIT.h5 FINAL.h5 METRICS.json MNIST_DDP_OPTIONS...
  INIT.h5: `mnist_ddp --epochs 0 --save-model` for the seed (the initial parameters);
  FINAL.h5, METRICS.json: the run's --save-model and --metrics (--log-interval 1: one loss per step);
  MNIST_DDP_OPTIONS: the run's --data --model --optimizer sgd --batch-size --seed --lr --gamma
  --epochs, optionally --accum-steps and --momentum.

The promise, replayed with torch autograd and torch.optim.SGD (not a port of the C): in epoch e the
training set is shuffled by the permutation of (seed, e) (src/data/sampler.c, ported in rng.py); it is cut
into global batches of WORLD x batch samples, and rank r takes the r-th contiguous chunk of
ceil(R / WORLD) of a global batch of R samples (the last one is partial, its chunks uneven). Each rank
runs forward and backward on its own chunk (BatchNorm normalises by that chunk's statistics and
updates that rank's running statistics; dropout masks are keyed by the global sample id); the
gradient of an optimizer step is the sum over ranks and accumulated micro-batches of the summed loss
gradients, divided by the samples in the step; SGD steps with lr * gamma^(e - 1); after each epoch
the ranks' BatchNorm running statistics are averaged. Exit 0 when mnist_ddp's final parameters,
buffers, per-step losses and per-epoch test results match, 1 otherwise.
"""
import argparse
import json
import math
import os
import sys

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as exc:
    sys.exit(f"FAIL: the PyTorch reference needs torch, h5py and numpy ({exc})")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rng  # noqa: E402
from compare_model import Checker, ConvNet, Net, load  # noqa: E402
from eval_saved_model import load_split  # noqa: E402

DROPOUT_SALT = 0x64726F706F757421  # src/train/train.c: the dropout stream's domain separation

# Tolerances, |C - torch| <= ATOL + RTOL |torch|. Both sides add the same float32 terms in other
# orders (OpenBLAS GEMMs and a per-rank sum then an all-reduce, against oneDNN and autograd's
# accumulation), so the runs drift apart by rounding only: over the four cases of
# tests/integration/train-replay.sh, with OpenBLAS's default, Prescott, Haswell and SkylakeX kernels, at most
# 1.9e-7 on parameters, 3e-7 on running statistics and 1.1e-6 on losses (the metrics print 6
# decimals). Each mutation that test was written against (a partial batch scaled by the full batch
# size, an all-reduce per micro-batch, summed BatchNorm statistics, one shuffle for all epochs, a
# shifted StepLR) moves some tensor by 1.1e-4 or more and some loss by 1.6e-3 or more.
PARAM_TOL = (1e-5, 2e-6)  # (rtol, atol)
LOSS_TOL = (0, 5e-6)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("world", type=int)
    p.add_argument("init")
    p.add_argument("final")
    p.add_argument("metrics")
    # mnist_ddp's options, all explicit: the reference takes no default from the C.
    p.add_argument("--data", required=True)
    p.add_argument("--model", required=True, choices=("net", "convnet"))
    p.add_argument("--optimizer", required=True, choices=("sgd",))
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--gamma", type=float, required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--accum-steps", type=int, default=1)
    p.add_argument("--momentum", type=float, default=0.0)
    return p.parse_args(argv)


def h5_state(path):
    with h5py.File(path, "r") as f:
        return {k: np.asarray(f[k][()]) for k in f}


class Replicas:
    """One set of parameters (DDP keeps them identical) and each rank's BatchNorm statistics. The
    num_batches_tracked counts are kept as floats: averaging them over ranks that saw different
    numbers of batches gives fractions, as in the C."""

    def __init__(self, model, world, init):
        self.model = model
        load(model, init, init)
        self.stats = [{k: torch.from_numpy(np.asarray(init[k], dtype=np.float32)).clone()
                       for k, _ in model.named_buffers()} for _ in range(world)]

    def forward_backward(self, rank, x, y, ids, masks_key, scale):
        """Rank `rank` on samples ids; accumulates the gradient of scale * (summed loss)."""
        model, stats = self.model, self.stats[rank]
        with torch.no_grad():
            for k, b in model.named_buffers():
                if not k.endswith("num_batches_tracked"):
                    b.copy_(stats[k])
        if isinstance(model, Net):
            model.masks = (torch.from_numpy(rng.dropout_keep(masks_key, ids, 0, 9216, 0.25)).reshape(-1, 64, 12, 12),
                           torch.from_numpy(rng.dropout_keep(masks_key, ids, 1, 128, 0.5)))
        model.train()
        rows = torch.from_numpy(ids)
        loss = F.nll_loss(model(x[rows]), y[rows], reduction="sum")
        (loss * scale).backward()
        for k, b in model.named_buffers():
            stats[k] = stats[k] + 1 if k.endswith("num_batches_tracked") else b.detach().clone()
        return loss.item()

    def average_stats(self):
        """sync_and_check: a float sum over ranks, divided by the world size."""
        world = len(self.stats)
        for k in self.stats[0]:
            mean = torch.stack([s[k] for s in self.stats]).sum(0) / world
            for s in self.stats:
                s[k] = mean.clone()
        with torch.no_grad():
            for k, b in self.model.named_buffers():
                if not k.endswith("num_batches_tracked"):
                    b.copy_(self.stats[0][k])


def chunks(n, world, batch, micro):
    """The global batch `micro` of an epoch of n samples: its size and each rank's [lo, hi)."""
    g = world * batch
    start = micro * g
    size = min(g, n - start)
    per_rank = -(-size // world)
    return size, [(start + min(r * per_rank, size), start + min((r + 1) * per_rank, size)) for r in range(world)]


def train_epoch(a, reps, opt, x, y, epoch):
    """One epoch; returns the loss of each optimizer step (mean over its samples)."""
    n, world = len(y), a.world
    perm = rng.permutation(a.seed, epoch, n)
    masks_key = int(rng.key(rng.key(a.seed ^ DROPOUT_SALT, 0), epoch))
    micro_steps = -(-n // (world * a.batch_size))
    losses = []
    for s in range(0, micro_steps, a.accum_steps):
        micros = range(s, min(s + a.accum_steps, micro_steps))
        total = sum(chunks(n, world, a.batch_size, m)[0] for m in micros)
        opt.zero_grad(set_to_none=True)
        loss = 0.0
        for m in micros:
            for rank, (lo, hi) in enumerate(chunks(n, world, a.batch_size, m)[1]):
                if hi > lo:  # a rank without samples contributes nothing and keeps its statistics
                    loss += reps.forward_backward(rank, x, y, perm[lo:hi], masks_key, 1.0 / total)
        opt.step()
        losses.append(loss / total)
    return losses


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        out = model(x)
        return F.nll_loss(out, y, reduction="sum").item() / len(y), int(out.argmax(1).eq(y).sum())


def replay(a):
    """Trains the reference; returns (per-step losses, per-epoch (test loss, correct), replicas)."""
    x, y = load_split(a.data, "train")
    tx, ty = load_split(a.data, "test")
    model = Net() if a.model == "net" else ConvNet()
    reps = Replicas(model, a.world, h5_state(a.init))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    steps, tests = [], []
    for epoch in range(1, a.epochs + 1):
        for group in opt.param_groups:
            group["lr"] = a.lr * a.gamma ** (epoch - 1)  # StepLR(step_size=1, gamma) stepped per epoch
        steps += train_epoch(a, reps, opt, x, y, epoch)
        reps.average_stats()
        tests.append(evaluate(model, tx, ty))
    reps.average_stats()  # the end of the run averages again (a no-op up to rounding)
    return steps, tests, reps


def compare(a, steps, tests, reps, chk):
    rows = [json.loads(line) for line in open(a.metrics) if line.strip()]
    c_steps = [r["loss"] for r in rows if r["type"] == "step"]
    c_epochs = [r for r in rows if r["type"] == "epoch"]
    chk.equal("optimizer steps", len(c_steps), len(steps))
    if len(c_steps) == len(steps):
        chk.close("per-step losses", c_steps, steps, *LOSS_TOL)
    chk.equal("epochs", len(c_epochs), len(tests))
    if len(c_epochs) == len(tests):
        chk.close("per-epoch test losses", [r["test_loss"] for r in c_epochs], [t[0] for t in tests], *LOSS_TOL)
        chk.equal("per-epoch correct test answers", [r["correct"] for r in c_epochs], [t[1] for t in tests])
    final = h5_state(a.final)
    want = {k: p.detach().numpy() for k, p in reps.model.named_parameters()}
    want.update(reps.stats[0])
    chk.equal("tensor names", sorted(final), sorted(want))
    for k in sorted(set(final) & set(want)):
        if k.endswith("num_batches_tracked"):
            # The C saves the averaged count as an integer, truncated.
            chk.equal(k, int(final[k]), math.floor(float(want[k])))
        else:
            chk.close(k, final[k], np.asarray(want[k]), *PARAM_TOL)


def main(argv):
    a = parse(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print(f"--- replay: {a.model}, {a.world} ranks x {a.batch_size} x {a.accum_steps} accumulation steps, "
          f"{a.epochs} epochs, lr {a.lr} gamma {a.gamma} momentum {a.momentum}, seed {a.seed}")
    steps, tests, reps = replay(a)
    chk = Checker()
    compare(a, steps, tests, reps, chk)
    if chk.failures:
        print(f"FAIL: {chk.failures} mismatches between mnist_ddp and the PyTorch replay")
        return 1
    print("PASS: mnist_ddp trained as the PyTorch replay of DDP")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
