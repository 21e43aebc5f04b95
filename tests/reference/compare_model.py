#!/usr/bin/env python3
"""Cross-check of the C models against PyTorch 1.13.

For each model, tests/reference/ref_model writes one batch, the initial parameters, the loss, all gradients,
the parameters after two Adadelta and two SGD steps, the eval-mode loss and accuracy and the
BatchNorm running statistics to HDF5. This script rebuilds the network in torch (the PyTorch
MNIST example's Net, with dropout drawn from the same counter-based masks through rng.py, and an
nn.Sequential ConvNet), loads the same parameters, and replays everything with torch's own
autograd and optimizers.

Exit 0 when all match, 1 on a mismatch (the worst offender is printed), 99 when torch is missing.

Tolerances (|c - torch| <= atol + rtol |torch|, elementwise):
  * loss: rtol 1e-5 (sums of 10-class log-softmax in float);
  * gradients: rtol 1e-3, atol 1e-5 * the largest gradient of the model. Both sides sum up to
    n*784 products per weight gradient in float, in different orders (OpenBLAS vs oneDNN), so
    elements near zero differ relatively but not absolutely: the observed absolute differences
    are at most 1.3e-6 of the largest gradient (convnet's conv biases, zero up to rounding behind
    BatchNorm, included), while a semantic error (a mask, an index order, a missing term) moves
    gradients by percent of their scale;
  * parameters after the steps: atol 2e-6, rtol 1e-5 (observed at most 4e-7: updates are ~1e-3
    and Adadelta's first step is nearly sign(g) sqrt(eps), so gradient rounding barely reaches
    the parameters);
  * running stats: rtol 2e-6, atol 2e-7 (observed 1e-7 relative, 9e-8 absolute on means near 0;
    tight enough to see a biased running_var, off by 0.1 var / (n H W - 1) > 6e-6 var);
  * eval loss rtol 1e-5 and exact correct counts, once at the initial parameters and once at the
    last ones, when five training passes have moved the running stats.
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as exc:  # the headline check: never let it vanish from a green run
    print(f"ERROR: cannot import the PyTorch reference stack ({exc}): apt-get install python3-torch python3-h5py")
    sys.exit(99)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rng  # noqa: E402
from eval_saved_model import Net as ExampleNet  # noqa: E402


class Net(ExampleNet):
    """pytorch/examples mnist/main.py, dropout replaced by the trainer's masks."""

    def __init__(self):
        super().__init__()
        self.masks = None  # (mask1 [n,64,12,12], mask2 [n,128]) in training mode

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        if self.training:
            x = masked_dropout(x, self.masks[0], self.dropout1.p)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        if self.training:
            x = masked_dropout(x, self.masks[1], self.dropout2.p)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.layer1 = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.layer2 = nn.Sequential(
            nn.Conv2d(16, 32, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2, stride=2))
        self.fc = nn.Linear(7 * 7 * 32, num_classes)

    def forward(self, x):
        out = self.layer1(x)
        out = self.layer2(out)
        out = out.reshape(out.size(0), -1)
        return F.log_softmax(self.fc(out), dim=1)  # with nll_loss: nn.CrossEntropyLoss


def masked_dropout(x, keep, p):
    """What F.dropout computes (input * bernoulli(1-p) / (1-p)) with the given mask."""
    return x * (keep.to(x.dtype) / (1 - p))


class Checker:
    def __init__(self):
        self.failures = 0

    def close(self, what, got, want, rtol, atol):
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            print(f"FAIL {what}: shape {got.shape}, torch {want.shape}")
            self.failures += 1
            return
        err = np.abs(got - want)
        excess = err - (atol + rtol * np.abs(want))
        i = np.unravel_index(np.argmax(excess), excess.shape) if excess.size else ()
        rel = float(np.max(err / np.maximum(np.abs(want), 1e-30))) if err.size else 0.0
        ok = not excess.size or excess[i] <= 0
        status = "ok  " if ok else "FAIL"
        detail = f" worst at {tuple(int(v) for v in i)}: C {got[i]:.9g} torch {want[i]:.9g}" if excess.size else ""
        print(f"{status} {what}: max abs err {err.max() if err.size else 0:.3g}, max rel err {rel:.3g}"
              + ("" if ok else detail))
        self.failures += not ok

    def equal(self, what, got, want):
        ok = np.array_equal(np.asarray(got), np.asarray(want))
        print(f"{'ok  ' if ok else 'FAIL'} {what}" + ("" if ok else f": C {got}, torch {want}"))
        self.failures += not ok


def load(model, params, buffers=None):
    """Copies tensors in place (load_state_dict would reset num_batches_tracked when it is absent)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(params[name])))
        for name, b in model.named_buffers() if buffers is not None else ():
            b.copy_(torch.from_numpy(np.asarray(buffers[name])))


def train_step(model, x, y):
    """Forward in training mode and backward of the mean loss; returns the loss."""
    model.train()
    model.zero_grad(set_to_none=True)
    loss = F.nll_loss(model(x), y)
    loss.backward()
    return loss.item()


def compare(name, seed, n, ref_model, tmpdir, chk, conv="im2col"):
    path = os.path.join(tmpdir, f"{name}-{conv}.h5")
    rc = subprocess.run([ref_model, name, str(seed), str(n), path, conv]).returncode
    if rc == 77:
        print(f"--- {name} with {conv} convolutions: not in this build (configure found no oneDNN)")
        return
    if rc != 0:
        raise SystemExit(f"ERROR: ref_model {name} {conv} exited with {rc}")
    print(f"--- {name} ({conv} convolutions): seed {seed}, batch {n}")
    with h5py.File(path, "r") as f:
        images = np.asarray(f["images"])
        labels = np.asarray(f["labels"]).astype(np.int64)
        ids = np.asarray(f["ids"])
        dropout_key = int(np.asarray(f["dropout_key"]))

        # The batch: rng.py regenerates the images (checks the port) and torchvision's transform
        # normalises them.
        want_images = rng.below(rng.key(seed, 1001), np.arange(n * 784, dtype=np.uint64), 256)
        chk.equal("images from rng.py", images.reshape(-1), want_images.astype(np.uint8))
        x = (torch.from_numpy(images).float().div(255) - torch.tensor([0.1307])) / torch.tensor([0.3081])
        chk.close("normalised images", np.asarray(f["x"]), x.numpy(), 0, 0)
        y = torch.from_numpy(labels)

        model = Net() if name == "net" else ConvNet()
        # Names, shapes and the flat layout: tensors back to back in named_parameters() order.
        offsets = {k: int(f["init"][k].attrs["offset"]) for k in f["init"]}
        layout, at = {}, 0
        for pname, p in model.named_parameters():
            layout[pname] = at
            at += p.numel()
        chk.equal("parameter names and flat offsets", offsets, layout)
        # Default init: U(-b, b), b = 1/sqrt(fan_in) for conv/linear weights and biases (torch's own
        # fan-in), BatchNorm weight 1 and bias 0.
        for mname, mod in model.named_modules():
            if isinstance(mod, nn.BatchNorm2d):
                chk.equal(f"init {mname} (BatchNorm)", (np.asarray(f["init"][mname + ".weight"]).tolist(),
                                                        np.asarray(f["init"][mname + ".bias"]).tolist()),
                          ([1.0] * mod.num_features, [0.0] * mod.num_features))
            elif isinstance(mod, (nn.Conv2d, nn.Linear)):
                bound = 1 / np.sqrt(nn.init._calculate_fan_in_and_fan_out(mod.weight)[0])
                for pname in ("weight", "bias"):
                    init = np.asarray(f["init"][f"{mname}.{pname}"])
                    spread = np.abs(init).max() / bound
                    ok = spread <= 1 and (init.size < 100 or spread > 0.95)
                    print(f"{'ok  ' if ok else 'FAIL'} init {mname}.{pname}: max |w| = {spread:.4f} bound")
                    chk.failures += not ok
        load(model, f["init"], f["init_buffers"] if name == "convnet" else None)

        if name == "net":
            model.masks = (torch.from_numpy(rng.dropout_keep(dropout_key, ids, 0, 9216, 0.25)).reshape(n, 64, 12, 12),
                           torch.from_numpy(rng.dropout_keep(dropout_key, ids, 1, 128, 0.5)))

        loss = train_step(model, x, y)
        chk.close("loss", float(np.asarray(f["loss_sum"])) / n, loss, 1e-5, 0)
        scale = max(float(p.grad.abs().max()) for p in model.parameters())
        print(f"     largest gradient {scale:.4g}")
        for pname, p in model.named_parameters():
            chk.close(f"grad {pname}", np.asarray(f["grad"][pname]), p.grad.numpy(), 1e-3, 1e-5 * scale)
        for bname, b in model.named_buffers():
            chk.close(f"buffer {bname}", np.asarray(f["buffers"][bname]), b.numpy(), 2e-6, 2e-7)

        evaluate(model, x, y, f, "", chk)

        for opt_name in ("adadelta", "sgd"):
            g = f[opt_name]
            hp = {k: float(np.asarray(g[k])) for k in ("lr", "rho", "eps", "momentum", "weight_decay")}
            load(model, f["init"])
            if opt_name == "adadelta":
                opt = torch.optim.Adadelta(model.parameters(), lr=hp["lr"], rho=hp["rho"], eps=hp["eps"],
                                           weight_decay=hp["weight_decay"])
            else:
                opt = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=hp["momentum"],
                                      weight_decay=hp["weight_decay"])
            for step in (1, 2):
                loss = train_step(model, x, y)
                chk.close(f"{opt_name} loss at step {step}", float(np.asarray(g[f"loss{step}_sum"])) / n, loss,
                          1e-5, 0)
                opt.step()
                for pname, p in model.named_parameters():
                    chk.close(f"{opt_name} step {step} {pname}", np.asarray(g[f"step{step}"][pname]),
                              p.detach().numpy(), 1e-5, 2e-6)

        # Last parameters, running stats after five training passes.
        evaluate(model, x, y, f, "final_", chk)
        for bname, b in model.named_buffers():
            chk.close(f"final buffer {bname}", np.asarray(f["final_buffers"][bname]), b.numpy(), 2e-6, 2e-7)


def evaluate(model, x, y, f, prefix, chk):
    model.eval()
    with torch.no_grad():
        out = model(x)
        eval_loss = F.nll_loss(out, y, reduction="sum").item()
        correct = int(out.argmax(dim=1).eq(y).sum().item())
    chk.close(f"{prefix}eval loss", float(np.asarray(f[prefix + "eval_loss_sum"])), eval_loss, 1e-5, 0)
    chk.equal(f"{prefix}eval correct", int(np.asarray(f[prefix + "eval_correct"])), correct)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    here = os.path.dirname(os.path.abspath(__file__))
    builddir = os.environ.get("abs_top_builddir", os.path.join(here, "..", ".."))
    ref_model = os.path.join(builddir, "tests", "reference", "ref_model")
    if not os.access(ref_model, os.X_OK):
        print(f"ERROR: {ref_model} is not built (make check builds it)")
        return 99
    chk = Checker()
    with tempfile.TemporaryDirectory() as tmpdir:
        for conv in ("im2col", "onednn", "winograd", "wino43"):
            compare("net", 1, 16, ref_model, tmpdir, chk, conv)
            compare("convnet", 2, 8, ref_model, tmpdir, chk, conv)
    if chk.failures:
        print(f"FAIL: {chk.failures} mismatches")
        return 1
    print("PASS: the C models match PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
