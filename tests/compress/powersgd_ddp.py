#!/usr/bin/python3
"""powersgd_ddp.py BENCH: gradsync's --compress powersgd, in the ring and in the
ps, against PyTorch's own powerSGD_hook under DistributedDataParallel (gloo, 2
processes, CPU).

Both sides start from the same parameters (.npy), read the same IDX files
without shuffling (DistributedSampler(shuffle=False): rank r takes samples r,
r+2, ...), and train an MLP with SGD + momentum for 20 steps: two plain
all-reduces (start_powerSGD_iter = 2), then PowerSGD at rank 2 with error
feedback and warm start. PyTorch draws its first Q from numpy/torch
generators gradsync does not have, so the hook's Q memory is filled before
its first compressed step with gradsync's draw (xoshiro256** + Box-Muller,
rng.h, reproduced below); from there both sides orthogonalize it and go on
alone. Every tensor must agree to 1e-4 relative (L2), and PowerSGD must
have moved the result away from plain DDP by far more than that, so the
comparison can fail. Exits 77 (skip) where PyTorch or its gloo backend is
missing.

    powersgd_ddp.py BENCH                 the test
    powersgd_ddp.py --rank R DIR PORT     one DDP process (internal)"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from gstest import check, finish, free_port

MODEL = [784, 64, 32, 10]
R, START, STEPS, BATCH, LR, MOMENTUM, SEED, N = 2, 2, 20, 16, 0.05, 0.9, 11, 256
NAMES = []
for i in range(len(MODEL) - 1):
    NAMES += [f"fc{i + 1}.weight", f"fc{i + 1}.bias"]

# ---------------------------------------------------------------- gradsync's generator
M64 = (1 << 64) - 1


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Xoshiro:
    """kernels/rng.h: xoshiro256** seeded by splitmix64 from seed ^ stream * C"""

    def __init__(self, seed, stream):
        x = (seed ^ (stream * 0xd1342543de82ef95)) & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9e3779b97f4a7c15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
            z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
            self.s.append(z ^ (z >> 31))

    def next(self):
        s = self.s
        out = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return out

    def normal(self):
        u1 = (self.next() >> 11) * 2.0 ** -53
        u2 = (self.next() >> 11) * 2.0 ** -53
        return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(6.283185307179586 * u2)


def first_q(tensor_index, cols, rank):
    """gradsync's first Q of tensor i (cols x rank, row-major)"""
    g = Xoshiro(SEED, 0x5000 + tensor_index)
    return np.array([g.normal() for _ in range(cols * rank)], dtype=np.float32).reshape(cols, rank)


# ---------------------------------------------------------------- one DDP rank
def ddp_rank(rank, d, port, hook_on):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ph
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    import datetime
    dist.init_process_group("gloo", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(len(MODEL) - 1):
                setattr(self, f"fc{i + 1}", nn.Linear(MODEL[i], MODEL[i + 1]))

        def forward(self, x):
            n = len(MODEL) - 1
            for i in range(1, n + 1):
                x = getattr(self, f"fc{i}")(x)
                if i < n:
                    x = F.relu(x)
            return x

    m = MLP()
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.from_numpy(np.load(os.path.join(d, "init", name + ".npy"))))
    model = DDP(m)
    names = {id(p): i for i, (_, p) in enumerate(m.named_parameters())}
    if hook_on:
        state = ph.PowerSGDState(process_group=None, matrix_approximation_rank=R,
                                 start_powerSGD_iter=START, min_compression_rate=2,
                                 use_error_feedback=True, warm_start=True)

        def hook(state, bucket):
            # gradsync's first Q, laid out as the hook lays out its Q memory:
            # compressed tensors in bucket order, grouped by shape
            if state.iter >= state.start_powerSGD_iter and bucket.index() not in state.q_memory_dict:
                groups, total_p = {}, 0
                for t, p in zip(bucket.gradients(), bucket.parameters()):
                    n, mm = t.shape[0], t.numel() // t.shape[0]
                    r = min(n, mm, R)
                    if ph._should_compress(n, mm, r, state.min_compression_rate)[0]:
                        groups.setdefault((n, mm), []).append(first_q(names[id(p)], mm, r))
                        total_p += n * r
                qs = [q.reshape(-1) for g in groups.values() for q in g]
                state.p_memory_dict[bucket.index()] = torch.empty(total_p)
                state.q_memory_dict[bucket.index()] = torch.from_numpy(np.concatenate(qs))
            return ph.powerSGD_hook(state, bucket)

        model.register_comm_hook(state, hook)
    x = np.fromfile(os.path.join(d, "img.idx"), dtype=np.uint8, offset=16).reshape(N, -1)
    y = np.fromfile(os.path.join(d, "lab.idx"), dtype=np.uint8, offset=8).astype(np.int64)
    x = torch.tensor(x.astype(np.float32) / np.float32(255))
    y = torch.tensor(y)
    shard = list(range(rank, N, 2))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    pos = 0
    for _ in range(STEPS):
        if pos >= len(shard):
            pos = 0
        idx = shard[pos:pos + BATCH]
        pos += len(idx)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
    if rank == 0:
        out = os.path.join(d, "torch" if hook_on else "torch-plain")
        os.makedirs(out, exist_ok=True)
        for name, p in m.named_parameters():
            np.save(os.path.join(out, name + ".npy"), p.detach().numpy())
        print(f"torch {torch.__version__} DDP{' + powerSGD_hook' if hook_on else ''}: "
              f"{STEPS} steps, rank 0's last loss {loss.item():.6f}")
    # both ranks past their last step, then out without gloo's teardown, whose
    # threads can abort a process that exits while its peer already closed
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


# ---------------------------------------------------------------- the test
def torch_run(d, hook_on):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r), d,
                               str(port), str(int(hook_on))], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=180)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit("powersgd_ddp: a DDP process did not finish in 180 s")
    if any(p.returncode for p in procs):
        raise SystemExit("powersgd_ddp: DDP failed:\n" + "\n".join(outs))
    print(outs[0].strip())


def load(d):
    return {n: np.load(os.path.join(d, n + ".npy")) for n in NAMES}


def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b))


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--rank":
        ddp_rank(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1")
        return 0
    bench = os.path.abspath(sys.argv[1])
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook  # noqa: F401
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed with gloo")
    except ImportError as ex:
        print(f"powersgd_ddp: skipped: PyTorch is missing here ({ex}; Debian: python3-torch)")
        return 77
    with tempfile.TemporaryDirectory(prefix="gs_psgd_") as d:
        rng = np.random.default_rng(5)
        with open(os.path.join(d, "img.idx"), "wb") as f:
            f.write(bytes([0, 0, 8, 3]) + N.to_bytes(4, "big") + (28).to_bytes(4, "big") * 2)
            f.write(rng.integers(0, 256, (N, 28, 28)).astype(np.uint8).tobytes())
        with open(os.path.join(d, "lab.idx"), "wb") as f:
            f.write(bytes([0, 0, 8, 1]) + N.to_bytes(4, "big"))
            f.write(rng.integers(0, 10, N).astype(np.uint8).tobytes())
        os.makedirs(os.path.join(d, "init"))
        for i in range(len(MODEL) - 1):  # nn.Linear's init, NumPy's generator
            bound = 1 / np.sqrt(MODEL[i])
            np.save(os.path.join(d, "init", f"fc{i + 1}.weight.npy"),
                    rng.uniform(-bound, bound, (MODEL[i + 1], MODEL[i])).astype(np.float32))
            np.save(os.path.join(d, "init", f"fc{i + 1}.bias.npy"),
                    rng.uniform(-bound, bound, MODEL[i + 1]).astype(np.float32))
        model = "mlp:" + "-".join(str(s) for s in MODEL)
        data = f"idx:{d}/img.idx,{d}/lab.idx"
        torch_run(d, True)
        torch_run(d, False)
        theirs, plain = load(d + "/torch"), load(d + "/torch-plain")
        init = load(d + "/init")
        # the ring all-reduces P and Q; the ps server sums them and runs the
        # optimizer (ps/powersgd_recv.c): both must be PyTorch's hook
        for mode in ("ring", "ps"):
            cmd = [bench, "--mode", mode, "--world", "2", "--model", model, "--data", data,
                   "--batch", str(BATCH), "--steps", str(STEPS), "--lr", str(LR), "--momentum",
                   str(MOMENTUM), "--seed", str(SEED), "--no-shuffle", "--threads", "1",
                   "--quiet", "--link", "none", "--repeat", "1", "--load-params", d + "/init",
                   "--compress", f"powersgd:{R}", "--powersgd-start", str(START),
                   "--out", f"{d}/run-{mode}", "--save-params", f"{d}/ours-{mode}"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
            if r.returncode:
                print(" ".join(cmd), r.stdout, r.stderr)
                return 1
            ours = load(f"{d}/ours-{mode}")
            print(f"--mode {mode}:")
            for n in NAMES:
                diff, effect = rel(ours[n], theirs[n]), rel(plain[n], theirs[n])
                moved = rel(theirs[n], init[n])
                ok = diff <= 1e-4 and (effect >= 1e-3 or n.endswith("bias"))
                print(f"  {n:11s} gradsync vs torch powerSGD_hook {diff:.2e} (limit 1e-4); "
                      f"powerSGD vs plain DDP {effect:.2e}; moved by training {moved:.2e}"
                      f"{'' if ok else '  <-- FAIL'}")
                check(ok, f"--mode {mode} {n}: gradsync vs torch powerSGD_hook {diff:.2e} (limit "
                      f"1e-4), powerSGD vs plain DDP {effect:.2e} (at least 1e-3 on a weight)")
        # the weights are where compression acts: it must show there
        worst_effect = min(rel(plain[n], theirs[n]) for n in NAMES if n.endswith("weight"))
        print(f"powersgd_ddp: smallest effect of PowerSGD on a weight {worst_effect:.2e}")
    finish("powersgd_ddp")


if __name__ == "__main__":
    sys.exit(main())
