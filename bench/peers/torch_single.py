#!/usr/bin/python3
"""torch_single.py: the PyTorch peer of `bench` for single-process throughput.

Trains the same MLP as `bench --model mlp:784-2048-2048-10` (nn.Linear + ReLU,
softmax cross-entropy, torch.optim.SGD with momentum) on random inputs, batch
B, in one process, and prints samples/s measured the same way bench does:
wall time of the steps after the warm-up ones (forward, backward, step,
zero_grad; the data is a fresh random batch drawn from a preallocated pool,
as bench's copy of a batch from memory).

Thread settings matter more than anything else here: Debian's OpenBLAS uses
every core unless OPENBLAS_NUM_THREADS says otherwise, whatever
torch.set_num_threads says, so --threads sets both (the environment variable
before torch is imported). And with more than one thread, torch's OpenMP
workers spin (OMP_WAIT_POLICY=active, libgomp's default) while OpenBLAS's own
pthreads run the GEMMs on the same cores: on a 2-core machine that halves
PyTorch's throughput (measured: ~2,100 instead of ~4,300 samples/s). This
script sets OMP_WAIT_POLICY=passive unless the caller set it, so gradsync is
compared with PyTorch at its best; the policy is printed.

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/peers/torch_single.py --threads 1

--device cuda trains on the GPU instead (fp32 exact: TF32 off, PyTorch's
default for matmul, set explicitly; the pool of batches lives on the GPU as
bench's synthetic data does); the timed span starts and ends with
torch.cuda.synchronize(). --batch takes a list (64,1024): one process
measures each in turn, which saves an import of torch per batch.

--graph (with --device cuda) captures the whole step (forward, backward,
SGD update) in one CUDA graph (torch.cuda.graph, after warm-up steps on a
side stream, as PyTorch's documentation does for whole-network capture)
and replays it, the batch copied into the captured input first: PyTorch
without its per-op dispatch. Where this torch cannot capture it (no
torch.cuda.graph, or the capture fails), it says why on stderr and exits 3.
"""
import argparse
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp:784-2048-2048-10")
    ap.add_argument("--batch", default="256", help="per-step batch, or a list: 64,1024")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--graph", action="store_true", help="the step captured in a CUDA graph")
    args = ap.parse_args()
    if args.graph and args.device != "cuda":
        ap.error("--graph captures CUDA graphs: give --device cuda")
    if not args.model.startswith("mlp:"):
        ap.error("--model: only mlp:IN-H...-OUT is supported by this peer")
    try:
        sizes = [int(s) for s in args.model[4:].split("-")]
    except ValueError:
        ap.error("--model: sizes must be integers, e.g. mlp:784-2048-2048-10")
    if len(sizes) < 2 or min(sizes) <= 0:
        ap.error("--model: need at least two positive sizes")
    if args.steps <= args.warmup:
        ap.error("--steps must exceed --warmup")

    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import torch
    import torch.nn as nn

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("torch_single.py: --device cuda but torch sees no CUDA GPU", file=sys.stderr)
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False
    if args.graph and not hasattr(torch.cuda, "graph"):
        print(f"torch_single.py: CUDA graph: unavailable: torch {torch.__version__} has no "
              "torch.cuda.graph", file=sys.stderr)
        return 3
    for batch in [int(b) for b in args.batch.split(",")]:
        try:
            one(args, sizes, batch, dev, torch, nn)
        except Captured as ex:
            print(f"torch_single.py: CUDA graph: unavailable: the capture failed: {ex}",
                  file=sys.stderr)
            return 3


class Captured(Exception):
    """the step could not be captured in a CUDA graph"""


def capture(model, opt, loss_fn, x, y, torch):
    """the step in a CUDA graph over the static batch x, y: (graph, its loss)"""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):  # the momentum buffers exist before the capture
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
    except Exception as ex:  # noqa: BLE001 -- whatever stops the capture is its reason
        raise Captured(str(ex).splitlines()[0] if str(ex) else type(ex).__name__) from ex
    return g, loss


def sync(dev, torch):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def one(args, sizes, batch, dev, torch, nn):
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    pool = 8
    xs = torch.rand(pool, batch, sizes[0], device=dev)
    ys = torch.randint(0, sizes[-1], (pool, batch), device=dev)

    graph = None
    if args.graph:
        static_x, static_y = xs[0].clone(), ys[0].clone()
        graph, loss = capture(model, opt, loss_fn, static_x, static_y, torch)
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            sync(dev, torch)
            t0, c0 = time.perf_counter(), time.process_time()
        x, y = xs[step % pool], ys[step % pool]
        if graph:
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            continue
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    sync(dev, torch)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = (args.steps - args.warmup) * batch
    where = torch.cuda.get_device_name(0) if dev.type == "cuda" else f"threads {args.threads}"
    if graph:
        where += ", CUDA graph"
    print(f"torch {torch.__version__} {dev.type} {where} "
          f"(OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}) model {args.model} "
          f"batch {batch}: {100 * cpu / dt:.0f}% CPU; {n / dt:.0f} samples/s "
          f"({args.steps - args.warmup} steps after {args.warmup} warm-up, loss {loss.item():.4f})")


if __name__ == "__main__":
    sys.exit(main())
