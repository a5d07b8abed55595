#!/usr/bin/python3
"""gloo_allreduce.py: PyTorch's Gloo all-reduce measured the way gradsync's
ring is (bench/coll/perf.c): float32 sum, sizes -b..-e by factor -f, -w
warm-up and -n timed iterations per size, the buffer refilled before and
checked against the exact sum after every iteration (rank r contributes
((i + 7r) mod 11) - 5 to element i), time = max over ranks of the mean
iteration time, printed as nccl-tests does. A peer benchmark, not part of
gradsync.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \\
        /usr/bin/python3 gloo_allreduce.py -N 2 -b 8 -e 256M -f 2 -n 20 -w 5

With RANK and WORLD_SIZE in the environment (a launcher's: torchrun, or
bench --hosts K --link RATE -- ... on emulated hosts) it is that one rank,
joining through MASTER_ADDR and MASTER_PORT, and -N is ignored.
"""
import argparse
import os
import socket
import sys
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(float(s))


def sizes(a):
    out, b, prev = [], float(a.b), 0
    while b <= a.e + 0.5:
        n = int(b) // 4 * 4
        if n and n != prev:
            out.append(n)
            prev = n
        b *= a.f
    return out


def run(rank, world, port, a):
    if os.environ.get("GS_PIN") == "1":  # as mpirun --bind-to core
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}" if port else "env://",
                            rank=rank, world_size=world)
    maxn = a.e // 4
    idx = torch.arange(maxn, dtype=torch.int64)
    src = ((idx + 7 * rank) % 11 - 5).to(torch.float32)
    expect = torch.zeros(11, dtype=torch.float32)
    for r in range(world):
        expect += ((torch.arange(11) + 7 * r) % 11 - 5).to(torch.float32)
    buf = torch.empty(maxn, dtype=torch.float32)
    if rank == 0:
        print(f"# {a.title}: all-reduce (sum) of float32, {world} ranks, {a.n} iterations "
              f"after {a.w} warm-up")
        print(f"# algbw = size / time; busbw = algbw x 2(n-1)/n = algbw x "
              f"{2 * (world - 1) / world:.3f} (GB/s = 1e9 bytes/s)")
        print("#%11s %12s %6s %6s %11s %8s %8s %8s" % ("size", "count", "type", "redop",
                                                       "time", "algbw", "busbw", "#wrong"))
        print("#%11s %12s %6s %6s %11s %8s %8s %8s" % ("(B)", "(elements)", "", "", "(us)",
                                                       "(GB/s)", "(GB/s)", ""))
        sys.stdout.flush()
    for nbytes in sizes(a):
        n = nbytes // 4
        view = buf[:n]
        want = expect[idx[:n] % 11]
        total, wrong = 0.0, 0
        for it in range(-a.w, a.n):
            view.copy_(src[:n])
            t0 = time.perf_counter()
            dist.all_reduce(view)
            dt = time.perf_counter() - t0
            if it >= 0:
                total += dt
                wrong += int((view != want).sum())
        stats = torch.tensor([total / a.n], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        bad = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(bad)
        if rank == 0:
            t = stats.item()
            algbw = nbytes / t / 1e9
            print("%12d %12d %6s %6s %11.2f %8.3f %8.3f %8d" % (
                nbytes, n, "float", "sum", t * 1e6, algbw,
                algbw * 2 * (world - 1) / world, bad.item()))
            sys.stdout.flush()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-N", type=int, default=2, help="ranks")
    p.add_argument("-b", type=size, default=8)
    p.add_argument("-e", type=size, default=256 << 20)
    p.add_argument("-f", type=float, default=2)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("--title", default=f"PyTorch {torch.__version__} Gloo all_reduce")
    a = p.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), None, a)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(a.N, port, a), nprocs=a.N, join=True)


if __name__ == "__main__":
    main()
