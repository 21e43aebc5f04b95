"""The peer: PyTorch's DDP MNIST example on the same HDF5 shards, for benchmarks.
Usage: pytorch_ddp_mnist.py DATA_DIR RANKS EPOCHS [MAX_STEPS [DEVICE]]. DEVICE: cpu (gloo, the default);
cuda (NCCL, one GPU per rank, PyTorch's defaults: cuDNN convolutions in TF32, matrix products in fp32);
cuda-fp32 (TF32 off everywhere, as mnist_ddp --precision fp32). Prints one JSON line (rank 0), with
peak_rss_mib: the largest peak resident set size of its ranks, as mnist_ddp reports its own."""
import json
import os
import re
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(__file__))
from eval_saved_model import Net, load_split  # noqa: E402


def load(data, prefix):
    return TensorDataset(*load_split(data, prefix))


def worker(rank, world, data, epochs, max_steps, port, device):
    torch.set_num_threads(1)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(rank)
        torch.backends.cudnn.allow_tf32 = device == "cuda"
        torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(f"cuda:{rank}" if cuda else "cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.manual_seed(1)
    t_start = time.time()
    train, test = load(data, "train"), load(data, "test")
    sampler = DistributedSampler(train, world, rank, shuffle=True, seed=1)
    loader = DataLoader(train, batch_size=64, sampler=sampler, pin_memory=cuda)
    model = DDP(Net().to(dev), device_ids=[rank] if cuda else None)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    train_s, images, steps = 0.0, 0, 0
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        t0 = time.time()
        for x, y in loader:
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            opt.zero_grad()
            F.nll_loss(model(x), y).backward()
            opt.step()
            images += len(y) * world
            steps += 1
            if max_steps and steps >= max_steps:
                break
        if cuda:
            torch.cuda.synchronize()
        train_s += time.time() - t0
        sched.step()
    model.eval()
    with torch.no_grad():
        correct = int((model(test.tensors[0].to(dev)).argmax(1).cpu() == test.tensors[1]).sum())
    # Linux reports KiB; the maximum over ranks, like mnist_ddp's summary.
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], dtype=torch.float64, device=dev)
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        # Which BLAS and vector ISA its CPU kernels use (a pip wheel brings MKL, Debian's its BLAS alternative).
        config = torch.__config__.show()
        blas = re.search(r"BLAS_INFO=(\w+)", config)
        isa = re.search(r"CPU capability usage: (\w+)", config)
        print(json.dumps({"peer": "pytorch-ddp-" + ("nccl-" + device if cuda else "gloo"), "torch": torch.__version__,
                          "blas": blas.group(1) if blas else "?", "cpu_capability": isa.group(1) if isa else "?",
                          "world": world, "epochs": epochs, "steps": steps, "train_s": round(train_s, 3),
                          "total_s": round(time.time() - t_start, 3),
                          "images_per_s": round(images / train_s, 1),
                          "test_accuracy": correct / len(test),
                          "peak_rss_mib": round(float(rss), 1)}), flush=True)
    dist.destroy_process_group()


def main():
    data, world, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    max_steps = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    device = sys.argv[5] if len(sys.argv) > 5 else "cpu"
    if device not in ("cpu", "cuda", "cuda-fp32"):
        sys.exit(f"pytorch_ddp_mnist.py: DEVICE must be cpu, cuda or cuda-fp32, not '{device}'")
    port = 29400 + os.getpid() % 1000
    mp.spawn(worker, args=(world, data, epochs, max_steps, port, device), nprocs=world)


if __name__ == "__main__":
    main()
