"""The tuned peer: pytorch_ddp_mnist.py's model and recipe (Adadelta lr 1.0, StepLR gamma 0.7 per epoch, batch
64, reshuffled each epoch, seed 1) as fast as PyTorch runs it on one GPU, for benchmarks.
Usage: pytorch_tuned_mnist.py DATA_DIR EPOCHS DEVICE [MAX_STEPS]. DEVICE: cuda (PyTorch's defaults: cuDNN in
TF32, matrix products in fp32), cuda-fp32 (TF32 off everywhere), cuda-tf32 (TF32 on everywhere), cpu (eager, one
thread: a smoke test). MAX_STEPS > 0 ends each epoch after that many steps. TUNED_BATCH: the training batch
(default 64, the recipe's; the benchmark's throughput rows use 256 and 1024). Prints one JSON line.
Both splits stay on the device (no DataLoader); each epoch permutes the training set with randperm on the device
(generator seeded 1 + epoch) and drops the last partial batch (937 steps of 64): every step has the same shapes.
channels_last, cudnn.benchmark. "mode" is the first that works of: cuda-graph (the whole step, optimizer
included, captured anew each epoch as it holds the learning rate as a constant; the warm-up steps before the
first capture are undone), cuda-graph-fwd-bwd (make_graphed_callables on the model), eager; with TUNED_COMPILE=1
first compile+cuda-graph and compile (torch.compile, max-autotune-no-cudagraphs). An epoch's time includes the
captures made in it; capture_s sums the warm-up and captures (and so compiling, in compile+cuda-graph). The
steady figures leave epoch 1 out when there are more."""
import time

T_START = time.perf_counter()

import gc  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from eval_saved_model import Net, load_split  # noqa: E402

PROG = "pytorch_tuned_mnist.py"
DEVICES = ("cuda", "cuda-fp32", "cuda-tf32", "cpu")
BATCH, TEST_BATCH = 64, 1000
WARMUP_STEPS = 3  # what torch.cuda.graphs' whole-network example runs before capturing
WHOLE_STEP = ("compile+cuda-graph", "cuda-graph")
CL = torch.channels_last
# Expected and harmless: step() of a capturable optimizer outside a capture (the warm-up), and 2.9+'s nudge
# from the allow_tf32 flags (which still set both APIs consistently) to fp32_precision.
warnings.filterwarnings("ignore", message=".*capturable=True.*")
warnings.filterwarnings("ignore", message=".*TF32.*")


def bad_argument(message):
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(64)


def parse_args(argv):
    if len(argv) not in (3, 4):
        bad_argument(f"expected the arguments DATA_DIR EPOCHS DEVICE [MAX_STEPS], got {len(argv)}")
    data, device = argv[0], argv[2]
    if not os.path.isdir(data):
        bad_argument(f"DATA_DIR '{data}' is not a directory")
    try:
        epochs = int(argv[1])
    except ValueError:
        epochs = 0
    if epochs < 1:
        bad_argument(f"EPOCHS must be a whole number >= 1, not '{argv[1]}'")
    if device not in DEVICES:
        bad_argument(f"DEVICE must be one of {', '.join(DEVICES)}, not '{device}'")
    try:
        max_steps = int(argv[3]) if len(argv) > 3 else 0
    except ValueError:
        max_steps = -1
    if max_steps < 0:
        bad_argument(f"MAX_STEPS must be a whole number >= 0, not '{argv[3]}'")
    return data, epochs, device, max_steps


def batch_from_env():
    text = os.environ.get("TUNED_BATCH", str(BATCH))
    try:
        batch = int(text)
    except ValueError:
        batch = 0
    if batch < 1:
        bad_argument(f"TUNED_BATCH must be a whole number >= 1, not '{text}'")
    return batch


def sync(cuda):
    if cuda:
        torch.cuda.synchronize()


def make_optimizer(model, cuda, capturable):
    accepts = inspect.signature(torch.optim.Adadelta).parameters
    kw = {}
    if cuda and "foreach" in accepts:
        kw["foreach"] = True  # a few multi-tensor kernels instead of several per parameter
    if capturable:
        if "capturable" not in accepts:
            raise TypeError(f"torch.optim.Adadelta of torch {torch.__version__} takes no capturable argument")
        kw["capturable"] = True  # its step count lives on the GPU, so step() can be captured
    return torch.optim.Adadelta(model.parameters(), lr=1.0, **kw)


def warm_up(step_model, model, opt, static_x, static_y):
    """The side-stream warm-up torch.cuda.graphs prescribes (cuDNN's benchmark, cuBLAS handles, the optimizer's
    state), then back to the seed's parameters and a fresh optimizer state, in place: the warm-up must not train."""
    saved = [p.detach().clone() for p in model.parameters()]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_STEPS):
            opt.zero_grad(set_to_none=True)
            F.nll_loss(step_model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    with torch.no_grad():
        for p, v in zip(model.parameters(), saved):
            p.copy_(v)
        for state in opt.state.values():
            for v in state.values():
                if torch.is_tensor(v):
                    v.zero_()  # Adadelta's state starts at zero: square_avg, acc_delta, step


def capture_step(step_model, opt, static_x, static_y):
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)  # backward then allocates the gradients in the graph's own pool
    with torch.cuda.graph(graph):
        F.nll_loss(step_model(static_x), static_y).backward()
        opt.step()
    return graph


def train(mode, dev, train_x, train_y, epochs, max_steps):
    """Trains from the seed in one mode; raises if that mode does not work here."""
    cuda = dev.type == "cuda"
    torch.manual_seed(1)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model = Net().to(dev, memory_format=CL)
    step_model = model
    if mode.startswith("compile"):
        step_model = torch.compile(model, mode="max-autotune-no-cudagraphs")
    opt = make_optimizer(model, cuda, capturable=mode in WHOLE_STEP)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    steps_per_epoch = len(train_y) // BATCH
    if not steps_per_epoch:
        bad_argument(f"TUNED_BATCH {BATCH} is larger than the {len(train_y)} training samples")
    if max_steps:
        steps_per_epoch = min(steps_per_epoch, max_steps)
    static_x, static_y = torch.empty_like(train_x[:BATCH]), torch.empty_like(train_y[:BATCH])
    graph, captures, capture_s, epoch_s = None, 0, 0.0, []
    for epoch in range(1, epochs + 1):
        model.train()
        sync(cuda)
        t0 = time.perf_counter()
        gen = torch.Generator(device=dev)
        gen.manual_seed(1 + epoch)
        perm = torch.randperm(len(train_y), generator=gen, device=dev)
        xs, ys = train_x[perm], train_y[perm]  # one gather an epoch; the batches are then slices of it
        if mode in WHOLE_STEP or (mode == "cuda-graph-fwd-bwd" and epoch == 1):
            c0 = time.perf_counter()
            graph = None  # the previous epoch's graph, its pool and the gradients in it go first
            static_x.copy_(xs[:BATCH])
            static_y.copy_(ys[:BATCH])
            if mode == "cuda-graph-fwd-bwd":
                # static_x becomes the graphs' input buffer; its warm-up uses autograd.grad, so nothing trains.
                step_model = torch.cuda.make_graphed_callables(model, (static_x,))
            else:
                if epoch == 1:
                    warm_up(step_model, model, opt, static_x, static_y)
                # StepLR changed the learning rate, which the captured step holds as a constant: capture anew.
                graph = capture_step(step_model, opt, static_x, static_y)
            sync(cuda)
            capture_s += time.perf_counter() - c0
            captures += 1
        for i in range(steps_per_epoch):
            xb, yb = xs[i * BATCH:(i + 1) * BATCH], ys[i * BATCH:(i + 1) * BATCH]
            if graph is not None:
                static_x.copy_(xb)
                static_y.copy_(yb)
                graph.replay()
            else:
                opt.zero_grad(set_to_none=True)
                F.nll_loss(step_model(xb), yb).backward()
                opt.step()
        sync(cuda)
        epoch_s.append(time.perf_counter() - t0)
        sched.step()
    return model, epoch_s, steps_per_epoch, capture_s, captures


def first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}".rstrip(": ")


def recover(cuda):
    """Clean up after a failed mode. A capture that failed inside torch.cuda.graph can leave its side stream
    current: the next mode runs on the default stream again."""
    gc.collect()
    if not cuda:
        return
    try:
        torch.cuda.set_stream(torch.cuda.default_stream())
    except (AttributeError, RuntimeError):
        pass
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def candidate_modes(cuda):
    """The modes to try, fastest first; the last one must work."""
    if not cuda:
        return ["eager"]
    compiled = ["compile+cuda-graph", "compile"] if os.environ.get("TUNED_COMPILE") == "1" else []
    return compiled + ["cuda-graph", "cuda-graph-fwd-bwd", "eager"]


def main():
    global BATCH
    data, epochs, device, max_steps = parse_args(sys.argv[1:])
    BATCH = batch_from_env()
    cuda = device != "cpu"
    if cuda and not torch.cuda.is_available():
        print(f"{PROG}: DEVICE {device}: torch {torch.__version__} sees no usable CUDA GPU "
              "(torch.cuda.is_available() is false)", file=sys.stderr)
        sys.exit(69)
    if cuda:
        torch.backends.cudnn.allow_tf32 = device != "cuda-fp32"
        torch.backends.cuda.matmul.allow_tf32 = device == "cuda-tf32"
        torch.backends.cudnn.benchmark = True
    else:
        torch.set_num_threads(1)
    modes = candidate_modes(cuda)
    dev = torch.device("cuda" if cuda else "cpu")
    (x, y), (tx, ty) = load_split(data, "train"), load_split(data, "test")
    train_x, train_y = x.to(dev).to(memory_format=CL), y.to(dev)
    test_x, test_y = tx.to(dev).to(memory_format=CL), ty.to(dev)
    reasons = []
    for mode in modes:
        try:
            model, epoch_s, steps_per_epoch, capture_s, captures = train(mode, dev, train_x, train_y, epochs,
                                                                        max_steps)
            break
        except Exception as e:  # noqa: BLE001 - any failure of a faster mode falls back to the next one
            if mode == modes[-1]:
                raise
            reasons.append(f"{mode}: {first_line(e)}")
        recover(cuda)  # after the except clause, which drops the traceback's hold on the failed mode's graphs
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=dev)
    with torch.no_grad():
        for i in range(0, len(test_y), TEST_BATCH):
            correct += (model(test_x[i:i + TEST_BATCH]).argmax(1) == test_y[i:i + TEST_BATCH]).sum()
    accuracy = int(correct) / len(test_y)
    train_s = sum(epoch_s)
    steady = epoch_s[1:] if epochs >= 2 else epoch_s
    images_per_epoch = steps_per_epoch * BATCH
    print(json.dumps({"peer": "pytorch-tuned-" + device, "torch": torch.__version__, "mode": mode,
                      "fallback_reason": "; ".join(reasons) or None, "world": 1, "batch": BATCH, "epochs": epochs,
                      "steps": steps_per_epoch * epochs, "epoch_s": [round(s, 4) for s in epoch_s],
                      "train_s": round(train_s, 4), "steady_s_per_epoch": round(sum(steady) / len(steady), 4),
                      "steady_images_per_s": round(images_per_epoch * len(steady) / sum(steady), 1),
                      "images_per_s": round(images_per_epoch * epochs / train_s, 1),
                      "capture_s": round(capture_s, 4), "captures": captures,
                      "total_s": round(time.perf_counter() - T_START, 3), "test_accuracy": accuracy,
                      "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
                      # Linux reports KiB.
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}),
          flush=True)


if __name__ == "__main__":
    main()
