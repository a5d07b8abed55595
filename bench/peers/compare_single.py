#!/usr/bin/python3
"""compare_single.py: single-process throughput of gradsync's `bench` against
PyTorch (bench/peers/torch_single.py) on the same MLP and batch, at the same
thread counts, in one run.

Each configuration runs --repeat times, the two programs alternating so a
noisy neighbour hurts both alike; the table shows the median samples/s of
each and their ratio. Both sides measure the same thing: wall time of the
steps after the warm-up ones, forward + backward + SGD update.

    bench/peers/compare_single.py --bench build/bench/bench [--threads 1,2] [--repeat 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    m = re.search(r"(\d+) samples/s", r.stdout.strip().splitlines()[-1])
    if not m:
        sys.exit(f"no samples/s in the output of {' '.join(cmd)}:\n{r.stdout}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/bench/bench")
    ap.add_argument("--model", default="mlp:784-2048-2048-10")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    rows = []
    for t in [int(x) for x in a.threads.split(",")]:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        ours, theirs = [], []
        for _ in range(a.repeat):
            ours.append(measure([a.bench, "--model", a.model, "--batch", str(a.batch), "--steps",
                                 str(a.steps), "--warmup", str(a.warmup), "--threads", str(t),
                                 "--quiet"], env))
            theirs.append(measure([sys.executable, os.path.join(HERE, "torch_single.py"),
                                   "--model", a.model, "--batch", str(a.batch), "--steps",
                                   str(a.steps), "--warmup", str(a.warmup), "--threads", str(t)],
                                  env))
        rows.append((t, statistics.median(ours), statistics.median(theirs), ours, theirs))
    print(f"{a.model}, batch {a.batch}, {a.steps} steps ({a.warmup} warm-up), "
          f"median of {a.repeat} alternating runs")
    print(f"{'threads':>7} {'gradsync':>10} {'pytorch':>10} {'ratio':>6}   runs (gradsync | pytorch)")
    for t, o, p, ours, theirs in rows:
        print(f"{t:>7} {o:>10.0f} {p:>10.0f} {o / p:>6.2f}   "
              f"{' '.join(f'{x:.0f}' for x in ours)} | {' '.join(f'{x:.0f}' for x in theirs)}")


if __name__ == "__main__":
    main()
