#!/usr/bin/python3
"""ref.py: an independent NumPy reference for gradsync's single-process training.

It shares no code with gradsync: it reads the same .npy initial parameters
(state_dict names, PyTorch shapes) and the same IDX / CIFAR-10 binary files,
and trains the MLP or LeNet exactly as PyTorch would with

    DataLoader(dataset, batch_size=B, shuffle=False)        # partial last batch kept
    CrossEntropyLoss()                                       # mean over the batch
    SGD(params, lr, momentum, weight_decay)                  # buf = g on the first step

in float64 (so its own rounding is negligible next to gradsync's float32),
then saves the parameters as .npy files with the same names.

    ref.py init  --model M --seed S --out DIR
    ref.py train --model M --data SPEC --batch B --steps S --lr X --momentum X
                 --weight-decay X --load-params DIR --save-params DIR [--freeze L,...]

--freeze: those layers' parameters do not train (requires_grad=False: the
optimizer skips them, the gradients of the others are unchanged).
"""
import argparse
import os
import sys

import numpy as np

# ---------------------------------------------------------------- models


def mlp_sizes(model):
    return [int(s) for s in model[4:].split("-")]


def param_shapes(model):
    """[(name, shape)] in parameters() order."""
    if model == "lenet":
        return [("conv1.weight", (6, 3, 5, 5)), ("conv1.bias", (6,)),
                ("conv2.weight", (16, 6, 5, 5)), ("conv2.bias", (16,)),
                ("fc1.weight", (120, 400)), ("fc1.bias", (120,)),
                ("fc2.weight", (84, 120)), ("fc2.bias", (84,)),
                ("fc3.weight", (10, 84)), ("fc3.bias", (10,))]
    if model.startswith("mlp:"):
        n = mlp_sizes(model)
        out = []
        for i in range(len(n) - 1):
            out.append((f"fc{i + 1}.weight", (n[i + 1], n[i])))
            out.append((f"fc{i + 1}.bias", (n[i + 1],)))
        return out
    raise SystemExit(f"ref.py: unknown model {model}")


def conv_forward(x, w, b):
    """valid convolution, stride 1: x [B,C,H,W], w [O,C,K,K] -> [B,O,H-K+1,W-K+1]"""
    k = w.shape[2]
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # B,C,OH,OW,K,K
    return np.einsum("bchwij,ocij->bohw", win, w, optimize=True) + b[None, :, None, None], win


def conv_backward(dy, x, w, win):
    k = w.shape[2]
    dw = np.einsum("bohw,bchwij->ocij", dy, win, optimize=True)
    db = dy.sum(axis=(0, 2, 3))
    dx = np.zeros_like(x)
    oh, ow = dy.shape[2], dy.shape[3]
    for i in range(k):
        for j in range(k):
            dx[:, :, i:i + oh, j:j + ow] += np.einsum("bohw,oc->bchw", dy, w[:, :, i, j])
    return dx, dw, db


def pool_forward(x):
    """2x2 max pool; ties go to the first in (0,0),(0,1),(1,0),(1,1) order"""
    b, c, h, w = x.shape
    win = x.reshape(b, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(
        b, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def pool_backward(dy, arg, shape):
    b, c, h, w = shape
    onehot = (np.arange(4) == arg[..., None]) * dy[..., None]  # b,c,h/2,w/2,4
    return onehot.reshape(b, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(shape)


def xent(z, y):
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = z.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    d = p.copy()
    d[np.arange(n), y] -= 1
    return loss, d / n


def loss_and_grads(model, P, x, y):
    g = {}
    if model == "lenet":
        x = x.reshape(-1, 3, 32, 32)
        a1, w1 = conv_forward(x, P["conv1.weight"], P["conv1.bias"])
        r1 = np.maximum(a1, 0)
        p1, arg1 = pool_forward(r1)
        a2, w2 = conv_forward(p1, P["conv2.weight"], P["conv2.bias"])
        r2 = np.maximum(a2, 0)
        p2, arg2 = pool_forward(r2)
        f = p2.reshape(p2.shape[0], -1)
        h1 = np.maximum(f @ P["fc1.weight"].T + P["fc1.bias"], 0)
        h2 = np.maximum(h1 @ P["fc2.weight"].T + P["fc2.bias"], 0)
        z = h2 @ P["fc3.weight"].T + P["fc3.bias"]
        loss, dz = xent(z, y)
        g["fc3.weight"], g["fc3.bias"] = dz.T @ h2, dz.sum(0)
        dh2 = (dz @ P["fc3.weight"]) * (h2 > 0)
        g["fc2.weight"], g["fc2.bias"] = dh2.T @ h1, dh2.sum(0)
        dh1 = (dh2 @ P["fc2.weight"]) * (h1 > 0)
        g["fc1.weight"], g["fc1.bias"] = dh1.T @ f, dh1.sum(0)
        df = (dh1 @ P["fc1.weight"]).reshape(p2.shape)
        dr2 = pool_backward(df, arg2, r2.shape) * (a2 > 0)
        dp1, g["conv2.weight"], g["conv2.bias"] = conv_backward(dr2, p1, P["conv2.weight"], w2)
        dr1 = pool_backward(dp1, arg1, r1.shape) * (a1 > 0)
        _, g["conv1.weight"], g["conv1.bias"] = conv_backward(dr1, x, P["conv1.weight"], w1)
        return loss, g
    n = len(mlp_sizes(model)) - 1
    acts = [x]
    for i in range(1, n + 1):
        h = acts[-1] @ P[f"fc{i}.weight"].T + P[f"fc{i}.bias"]
        acts.append(np.maximum(h, 0) if i < n else h)
    loss, d = xent(acts[-1], y)
    for i in range(n, 0, -1):
        g[f"fc{i}.weight"], g[f"fc{i}.bias"] = d.T @ acts[i - 1], d.sum(0)
        if i > 1:
            d = (d @ P[f"fc{i}.weight"]) * (acts[i - 1] > 0)
    return loss, g

# ---------------------------------------------------------------- data


def read_idx(path, want_dims):
    raw = open(path, "rb").read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 8 or raw[3] not in want_dims:
        raise SystemExit(f"ref.py: {path}: bad IDX magic")
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd)
    return data.reshape(dims)


def load_data(spec):
    if spec.startswith("idx:"):
        img, lab = spec[4:].split(",")
        x = read_idx(img, (3, 4))
        y = read_idx(lab, (1,))
        x = x.reshape(x.shape[0], -1)
    elif spec.startswith("cifar10:"):
        recs = [np.fromfile(f, dtype=np.uint8).reshape(-1, 3073) for f in spec[8:].split(",")]
        r = np.concatenate(recs)
        x, y = r[:, 1:], r[:, 0]
    else:
        raise SystemExit(f"ref.py: unsupported data {spec}")
    # ToTensor: float32 division by 255, then widened (the same values gradsync sees)
    return (x.astype(np.float32) / np.float32(255)).astype(np.float64), y.astype(np.int64)

# ---------------------------------------------------------------- training


def train(a):
    shapes = param_shapes(a.model)
    P = {}
    for name, shape in shapes:
        arr = np.load(os.path.join(a.load_params, name + ".npy"))
        if arr.shape != shape or arr.dtype != np.float32:
            raise SystemExit(f"ref.py: {name}.npy has {arr.shape} {arr.dtype}")
        P[name] = arr.astype(np.float64)
    x, y = load_data(a.data)
    n = len(y)
    bufs = {}
    frozen = set(a.freeze.split(",")) if a.freeze else set()
    pos = 0
    for step in range(a.steps):
        if pos >= n:
            pos = 0
        xb, yb = x[pos:pos + a.batch], y[pos:pos + a.batch]
        pos += len(yb)
        loss, g = loss_and_grads(a.model, P, xb, yb)
        for name, _ in shapes:
            if name.rsplit(".", 1)[0] in frozen:
                continue
            d = g[name] + a.weight_decay * P[name] if a.weight_decay else g[name]
            if a.momentum:
                bufs[name] = d if name not in bufs else a.momentum * bufs[name] + d
                d = bufs[name]
            P[name] = P[name] - a.lr * d
        if a.verbose:
            print(f"step {step + 1} loss {loss:.6f}")
    os.makedirs(a.save_params, exist_ok=True)
    for name, _ in shapes:
        np.save(os.path.join(a.save_params, name + ".npy"), P[name].astype(np.float32))
    print(f"ref.py: {a.model}, {a.steps} steps, final loss {loss:.6f}")


def init(a):
    """PyTorch-like init with NumPy's generator (not gradsync's)."""
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    shapes = param_shapes(a.model)
    for i in range(0, len(shapes), 2):
        (wn, ws), (bn, bs) = shapes[i], shapes[i + 1]
        bound = 1 / np.sqrt(np.prod(ws[1:]))
        np.save(os.path.join(a.out, wn + ".npy"), rng.uniform(-bound, bound, ws).astype(np.float32))
        np.save(os.path.join(a.out, bn + ".npy"), rng.uniform(-bound, bound, bs).astype(np.float32))


def main():
    ap = argparse.ArgumentParser(description="NumPy reference trainer for gradsync tests")
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--model", required=True)
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--out", required=True)
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
    t.add_argument("--verbose", action="store_true")
    t.add_argument("--freeze", default="")
    a = ap.parse_args()
    return init(a) if a.cmd == "init" else train(a)


if __name__ == "__main__":
    sys.exit(main())
