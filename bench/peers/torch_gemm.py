#!/usr/bin/python3
"""torch_gemm.py: torch.matmul's TFLOP/s on the GEMMs of an MLP's training
step, on one GPU, timed as tests/gpu/gemm_bench.c times gradsync's (the
same shapes, row-major, printed in the same table): for each layer
(in -> out) and batch B, forward x @ W.T (B x out x in), backward dy @ W
(B x in x out) and dy.T @ x (out x in x B); each runs --iters times back to
back after 5 untimed, then torch.cuda.synchronize(); wall time / iters.
fp32 is exact fp32 (TF32 off, PyTorch's default for matmul, set here
explicitly); fp16/bf16 inputs give fp16/bf16 outputs in PyTorch (gradsync's
gemm_lp writes fp32), which favours PyTorch slightly. A peer benchmark.

    python3 bench/peers/torch_gemm.py --batch 64,1024 --dtype fp32
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp:784-2048-2048-10")
    ap.add_argument("--batch", default="64,1024")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    args = ap.parse_args()
    sizes = [int(s) for s in args.model[4:].split("-")]
    import torch
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA GPU")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} matmul ({args.dtype}, TF32 off) on "
          f"{torch.cuda.get_device_name(0)}: {args.iters} iterations after 5 untimed, "
          "wall time / iterations")
    print(f"{'batch':<6} {'gemm':<10} {'m':>6} {'n':>6} {'k':>6} {'us':>10} {'TFLOP/s':>9}")
    for B in [int(b) for b in args.batch.split(",")]:
        tot_flop = tot_s = 0.0
        for l in range(len(sizes) - 1):
            i, o = sizes[l], sizes[l + 1]
            x = torch.rand(B, i, device=dev, dtype=dt)
            w = torch.rand(o, i, device=dev, dtype=dt)
            dy = torch.rand(B, o, device=dev, dtype=dt)
            cases = [("forward", lambda: x @ w.t(), B, o, i),
                     ("dx", lambda: dy @ w, B, i, o),
                     ("dW", lambda: dy.t() @ x, o, i, B)]
            for j, (name, f, m, n, k) in enumerate(cases):
                if l == 0 and j == 1:
                    continue
                for _ in range(5):
                    f()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(args.iters):
                    f()
                torch.cuda.synchronize()
                s = (time.perf_counter() - t0) / args.iters
                flop = 2.0 * m * n * k
                tot_flop += flop
                tot_s += s
                print(f"{B:<6} {name + '.' + str(l):<10} {m:>6} {n:>6} {k:>6} "
                      f"{s * 1e6:>10.1f} {flop / s / 1e12:>9.2f}")
        print(f"{B:<6} {'step':<10} {'':>6} {'':>6} {'':>6} {tot_s * 1e6:>10.1f} "
              f"{tot_flop / tot_s / 1e12:>9.2f}")


if __name__ == "__main__":
    sys.exit(main())
