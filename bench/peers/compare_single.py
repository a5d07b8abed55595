#!/usr/bin/python3
"""compare_single.py: single-process throughput of gradsync's `bench` against
PyTorch (bench/peers/torch_single.py) on the same MLP and batch, at the same
thread counts, in one run.

Each configuration runs --repeat times, the two programs alternating so a
noisy neighbour hurts both alike; the table shows the median samples/s of
each, their ratio, and every run. Both sides measure the same thing: wall
time of the steps after the warm-up ones, forward + backward + SGD update.

    bench/peers/compare_single.py --bench build/bench/bench [--threads 1,2] [--repeat 5]
    bench/peers/compare_single.py --device cuda --batch 64,1024 --repeat 3

With --device cuda both train on the GPU (fp32, TF32 off on both sides);
threads only set the BLAS threads of the host side then. --graph adds a
third column: PyTorch with the step captured in a CUDA graph
(torch_single.py --graph), beside eager PyTorch, or why this torch cannot.
--json FILE writes every run's figures for scripts (tests/gpu/device_run.sh).
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure_bench(cmd, env):
    """(samples/s, CPU utilisation in %) of one `bench --mode local` run: the
    throughput from its report.json, CPU from the child's rusage over the
    whole process (start-up included, so slightly pessimistic)"""
    out = tempfile.mkdtemp(prefix="gs_cmp_")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    r = subprocess.run(cmd + ["--out", out], capture_output=True, text=True, env=env, timeout=900)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    with open(os.path.join(out, "report.json")) as f:
        run = json.load(f)["runs"][0]
    shutil.rmtree(out, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run["throughput_samples_per_s"], 100 * cpu / wall


class Unavailable(Exception):
    """the peer cannot run this way here (torch_single.py exit 3): why"""


def measure(cmd, env):
    """(samples/s, CPU utilisation in %) from the program's last line"""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode == 3:
        raise Unavailable(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit 3")
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    last = r.stdout.strip().splitlines()[-1]
    m, c = re.search(r"(\d+) samples/s", last), re.search(r"(\d+)% CPU", last)
    if not m or not c:
        sys.exit(f"no samples/s or CPU in the output of {' '.join(cmd)}:\n{r.stdout}")
    return float(m.group(1)), float(c.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/bench/bench")
    ap.add_argument("--model", default="mlp:784-2048-2048-10")
    ap.add_argument("--batch", default="256", help="a list: 64,1024")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--graph", action="store_true",
                    help="also PyTorch with the step in a CUDA graph (--device cuda)")
    ap.add_argument("--json", metavar="FILE", help="every run's figures, as JSON")
    a = ap.parse_args()
    if a.graph and a.device != "cuda":
        ap.error("--graph needs --device cuda")
    rows = []
    graph_why = None  # why PyTorch's CUDA graph did not run, once it did not
    batches = [int(b) for b in a.batch.split(",")]
    for t in [int(x) for x in a.threads.split(",")]:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        for b in batches:
            row = {"threads": t, "batch": b, "gradsync": [], "pytorch": [], "gradsync_cpu": [],
                   "pytorch_cpu": [], "pytorch_graph": [] if a.graph else None}
            peer = [sys.executable, os.path.join(HERE, "torch_single.py"), "--model", a.model,
                    "--batch", str(b), "--steps", str(a.steps), "--warmup", str(a.warmup),
                    "--threads", str(t), "--device", a.device]
            for _ in range(a.repeat):
                x, c = measure_bench([a.bench, "--mode", "local", "--model", a.model,
                                      "--batch", str(b), "--steps", str(a.steps), "--warmup",
                                      str(a.warmup), "--threads", str(t), "--device",
                                      a.device, "--quiet"], env)
                row["gradsync"].append(x)
                row["gradsync_cpu"].append(x / (c / 100) if c else 0)
                x, c = measure(peer, env)
                row["pytorch"].append(x)
                row["pytorch_cpu"].append(x / (c / 100) if c else 0)
                if a.graph and graph_why is None:
                    try:
                        row["pytorch_graph"].append(measure(peer + ["--graph"], env)[0])
                    except Unavailable as ex:
                        graph_why = str(ex)
            if graph_why is not None:
                row["pytorch_graph"] = None
            rows.append(row)
    print_tables(a, rows, graph_why)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "device": a.device, "steps": a.steps,
                       "warmup": a.warmup, "repeat": a.repeat, "graph_asked": a.graph,
                       "graph_unavailable": graph_why, "rows": rows}, f, indent=1)


def print_tables(a, rows, graph_why):
    med = statistics.median
    print(f"{a.model} on {a.device}, {a.steps} steps ({a.warmup} warm-up), "
          f"{a.repeat} alternating runs each, samples/s; pytorch: eager (one op at a time)"
          + (", pytorch graph: the step captured in a CUDA graph" if a.graph else ""))
    graph = a.graph and graph_why is None
    print(f"{'threads':>7} {'batch':>6} | {'median: gradsync':>16} {'pytorch':>8} {'ratio':>5}"
          + (f" {'pytorch graph':>13} {'ratio':>5}" if graph else "") +
          " | runs (gradsync / pytorch" + (" / pytorch graph)" if graph else ")"))
    for r in rows:
        mo, mp = med(r["gradsync"]), med(r["pytorch"])
        line = f"{r['threads']:>7} {r['batch']:>6} | {mo:>16.0f} {mp:>8.0f} {mo / mp:>5.2f}"
        runs = [r["gradsync"], r["pytorch"]]
        if graph:
            mg = med(r["pytorch_graph"])
            line += f" {mg:>13.0f} {mo / mg:>5.2f}"
            runs.append(r["pytorch_graph"])
        print(line + " | " + " / ".join(" ".join(f"{x:.0f}" for x in xs) for xs in runs))
    if a.graph and graph_why is not None:
        print(f"pytorch graph: not measured: {graph_why}")

    print("\nsamples per CPU-second (process CPU time over the same steps: robust to a busy "
          "machine, but counts spinning threads), median:")
    for r in rows:
        mo, mp = med(r["gradsync_cpu"]), med(r["pytorch_cpu"])
        print(f"{r['threads']:>7} {r['batch']:>6} | gradsync {mo:>6.0f}  pytorch {mp:>6.0f}  "
              f"ratio {mo / mp:.2f}")


if __name__ == "__main__":
    main()

