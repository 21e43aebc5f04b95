"""Loads a model written by `mnist_ddp --save-model` into PyTorch, the way a user would (h5py ->
state_dict), evaluates the MNIST test shards, and checks the count of correct answers mnist_ddp
reported. Usage: eval_saved_model.py MODEL.h5 DATA_DIR EXPECTED_CORRECT"""
import glob
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """The PyTorch MNIST example network, as published."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def load_split(data, prefix):
    """A split's shards concatenated in file order (the IDX order), normalised as the example does:
    images [n, 1, 28, 28] float32, labels int64."""
    images, labels = [], []
    for shard in sorted(glob.glob(os.path.join(data, prefix + "-*.h5"))):
        with h5py.File(shard, "r") as f:
            images.append(f["images"][()])
            labels.append(f["labels"][()])
    if not images:
        sys.exit(f"FAIL: no {prefix} shards in {data}")
    x = torch.from_numpy(np.concatenate(images)).float().reshape(-1, 1, 28, 28)
    x = (x.div(255) - torch.tensor([0.1307])) / torch.tensor([0.3081])
    return x, torch.from_numpy(np.concatenate(labels)).long()


def main():
    path, data, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = Net()
    with h5py.File(path, "r") as f:  # as the README shows
        model.load_state_dict({k: torch.as_tensor(f[k][()]) for k in f})
        name = f.attrs["model"]
    if (name.decode() if isinstance(name, bytes) else name) != "net":
        sys.exit(f"{path} holds model {name!r}, this check knows 'net'")
    model.eval()
    x, y = load_split(data, "test")
    with torch.no_grad():
        correct = int((model(x).argmax(1) == y).sum())
    print(f"PyTorch: {correct}/{len(y)} correct; mnist_ddp reported {expected}")
    sys.exit(0 if correct == expected else 1)


if __name__ == "__main__":
    main()
