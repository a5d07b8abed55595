#!/usr/bin/python3
"""torch_ref.py: PyTorch itself as the reference for gradsync's training.

The same command line as ref.py's `train` (ref.py reads the data and the
.npy parameters; this file only swaps the arithmetic): nn.Linear /
nn.Conv2d / max_pool2d / CrossEntropyLoss / torch.optim.SGD in float32 on
the CPU, one thread, batches taken in order as DataLoader(shuffle=False)
does. Exits 77 (skip) where PyTorch is not installed.

    torch_ref.py train --model M --data SPEC --batch B --steps S --lr X
                       --momentum X --weight-decay X --load-params DIR --save-params DIR
                       [--freeze L,...]   (those layers' requires_grad=False)
"""
import argparse
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_ref.py: PyTorch is not installed (Debian: python3-torch); skipped")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref  # noqa: E402  (data and parameter layout, shared with the NumPy reference)


def forward(model, P, x):
    if model == "lenet":
        h = x.reshape(-1, 3, 32, 32)
        h = F.max_pool2d(F.relu(F.conv2d(h, P["conv1.weight"], P["conv1.bias"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, P["conv2.weight"], P["conv2.bias"])), 2)
        h = h.reshape(h.shape[0], -1)
        h = F.relu(F.linear(h, P["fc1.weight"], P["fc1.bias"]))
        h = F.relu(F.linear(h, P["fc2.weight"], P["fc2.bias"]))
        return F.linear(h, P["fc3.weight"], P["fc3.bias"])
    n = len(ref.mlp_sizes(model)) - 1
    h = x
    for i in range(1, n + 1):
        h = F.linear(h, P[f"fc{i}.weight"], P[f"fc{i}.bias"])
        if i < n:
            h = F.relu(h)
    return h


def train(a):
    torch.set_num_threads(1)
    shapes = ref.param_shapes(a.model)
    frozen = set(a.freeze.split(",")) if a.freeze else set()
    P = {}
    for name, shape in shapes:
        arr = np.load(os.path.join(a.load_params, name + ".npy"))
        if arr.shape != shape or arr.dtype != np.float32:
            raise SystemExit(f"torch_ref.py: {name}.npy has {arr.shape} {arr.dtype}")
        P[name] = torch.tensor(arr, requires_grad=name.rsplit(".", 1)[0] not in frozen)
    x, y = ref.load_data(a.data)
    x = torch.tensor(x.astype(np.float32))  # exactly byte/255 in float32, as ToTensor
    y = torch.tensor(y)
    opt = torch.optim.SGD([P[n] for n, _ in shapes], lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    pos, n = 0, len(y)
    for _ in range(a.steps):
        if pos >= n:
            pos = 0
        xb, yb = x[pos:pos + a.batch], y[pos:pos + a.batch]
        pos += len(yb)
        opt.zero_grad()
        loss = F.cross_entropy(forward(a.model, P, xb), yb)
        loss.backward()
        opt.step()
    os.makedirs(a.save_params, exist_ok=True)
    for name, _ in shapes:
        np.save(os.path.join(a.save_params, name + ".npy"), P[name].detach().numpy())
    print(f"torch_ref.py: {a.model}, {a.steps} steps, final loss {loss.item():.6f} "
          f"(torch {torch.__version__})")


def main():
    ap = argparse.ArgumentParser(description="PyTorch reference trainer for gradsync tests")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--momentum", type=float, default=0.0)
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--load-params", required=True)
    t.add_argument("--save-params", required=True)
    t.add_argument("--freeze", default="")
    return train(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
