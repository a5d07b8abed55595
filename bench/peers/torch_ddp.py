#!/usr/bin/python3
"""torch_ddp.py: PyTorch DistributedDataParallel (Gloo) as a peer of `bench`.

Trains the model bench trains (mlp:IN-H...-OUT with ReLU between layers, or
lenet) with DDP over Gloo on WORLD processes of this machine, batch B per
rank, torch.optim.SGD, softmax cross-entropy, on synthetic data of the same
shape, and measures it the way bench does: a step's time is the max over
ranks of batch start to optimizer step done; throughput is global samples /
the sum of the measured steps' times (the first --warmup steps left out).
It prints one JSON object on stdout (rank 0), the measured figures only.

Threads are set per rank as bench sets them (cores / world unless
--threads), through torch.set_num_threads and OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS and MKL_NUM_THREADS before
torch is imported (Debian's OpenBLAS uses every core otherwise), with
OMP_WAIT_POLICY=passive so torch's OpenMP workers do not spin against the
other ranks (see torch_single.py). Ranks are pinned one per core when
there are at least as many cores as ranks and --pin is given.

    /usr/bin/python3 bench/peers/torch_ddp.py --world 2 --batch 64 --steps 100
"""
import argparse
import json
import os
import socket
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp:784-2048-2048-10")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="per rank; 0: cores / world")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--freeze", default="", help="layers with requires_grad=False (bench's names: "
                    "fc1, conv2, ...)")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    if a.world < 1 or a.batch < 1 or a.steps <= a.warmup or a.warmup < 0:
        ap.error("need --world >= 1, --batch >= 1 and --steps > --warmup >= 0")
    if a.model != "lenet":
        try:
            sizes = [int(s) for s in a.model[4:].split("-")] if a.model.startswith("mlp:") else []
        except ValueError:
            sizes = []
        if len(sizes) < 2 or min(sizes) <= 0:
            ap.error(f"--model {a.model}: this peer runs mlp:IN-H...-OUT or lenet")
        a.sizes = sizes
    cores = os.cpu_count() or 1
    if a.threads <= 0:
        a.threads = max(1, cores // a.world)
    return a


def build(torch, nn, a):
    if a.model == "lenet":
        class LeNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
                self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

            def forward(self, x):
                F = nn.functional
                x = F.max_pool2d(F.relu(self.conv1(x)), 2)
                x = F.max_pool2d(F.relu(self.conv2(x)), 2)
                x = x.flatten(1)
                return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
        return LeNet(), (3, 32, 32), 10
    layers = []
    for i in range(len(a.sizes) - 1):
        layers.append(nn.Linear(a.sizes[i], a.sizes[i + 1]))
        if i < len(a.sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers), (a.sizes[0],), a.sizes[-1]


def rank_main(rank, a, port, q):
    import datetime
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if a.pin and (os.cpu_count() or 1) >= a.world:
        os.sched_setaffinity(0, {rank})
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    torch.manual_seed(0)
    model, shape, classes = build(torch, nn, a)
    # bench's layer names: an mlp's Linear layers are fc1, fc2, ... (Sequential indexes them)
    named = ({f"fc{i + 1}": m for i, m in enumerate(x for x in model if isinstance(x, nn.Linear))}
             if a.model != "lenet" else dict(model.named_children()))
    for layer in filter(None, a.freeze.split(",")):
        mod, _, tensor = layer.partition(".")
        for n, p in named[mod].named_parameters():
            if not tensor or n == tensor:
                p.requires_grad_(False)
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb) if a.world > 1 else model
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    pool = 8
    g = torch.Generator().manual_seed(rank)
    xs = torch.rand((pool, a.batch) + shape, generator=g)
    ys = torch.randint(0, classes, (pool, a.batch), generator=g)
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        out = ddp(xs[step % pool])
        loss = loss_fn(out, ys[step % pool])
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    t = torch.tensor(times, dtype=torch.float64)
    if a.world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        q.put(t.tolist())
    dist.destroy_process_group()


def main():
    a = parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        val = str(a.threads)
        os.environ[var] = val
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import torch
    import torch.multiprocessing as mp

    with socket.socket() as s:  # a free port for Gloo's store, chosen by the kernel
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, a, port, q)) for r in range(a.world)]
    for p in procs:
        p.start()
    try:
        steps = q.get(timeout=a.timeout + 60)
    except Exception:
        for p in procs:
            p.kill()
        print(f"torch_ddp.py: no result within {a.timeout + 60:.0f} s (a rank failed or hung)",
              file=sys.stderr)
        return 1
    for p in procs:
        p.join(timeout=a.timeout)
    if any(p.exitcode != 0 for p in procs):
        print(f"torch_ddp.py: rank exit codes {[p.exitcode for p in procs]}", file=sys.stderr)
        return 1
    measured = steps[a.warmup:]
    total = sum(measured)
    med = sorted(measured)[len(measured) // 2]
    print(json.dumps({
        "peer": "torch-ddp-gloo", "torch": torch.__version__, "model": a.model,
        "world": a.world, "batch": a.batch, "global_batch": a.batch * a.world,
        "steps": a.steps, "warmup_steps": a.warmup, "threads_per_rank": a.threads,
        "bucket_mb": a.bucket_mb, "pinned": bool(a.pin and (os.cpu_count() or 1) >= a.world),
        "throughput_samples_per_s": a.batch * a.world * len(measured) / total,
        "step_time_s_median": med, "step_time_s_mean": total / len(measured),
        "step_time_s": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
