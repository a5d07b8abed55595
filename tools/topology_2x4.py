#!/usr/bin/python3
"""topology_2x4.py: docs/topology.md's measurement (issue 33's check): on 2
emulated hosts of 4 ranks each at 1 Gbit/s, the hierarchical ring against
the flat ring, and the host-aggregated ps against the flat ps, with the
gradients of mlp:784-2048-2048-10; five rounds, the four configurations
interleaved in each, at --batch 2 and again at --batch 16; into
docs/results/<date>-topology-2x4.txt.

Each run, from the repository's root and as root (emulated hosts):

    build/bench/bench CONFIG --hosts 2 --world 8 --link 1gbit --model mlp:784-2048-2048-10 \\
        --synthetic-samples 2048 --threads 1 --batch B --steps 20 --warmup 4 --repeat 1 \\
        --timeout 120 --quiet --out DIR/CONFIG-B-ROUND

with CONFIG one of hier (--mode ring --algo hier), ring (--mode ring --algo
ring), local (--mode ps --ps-local-reduce) and flat (--mode ps
--no-ps-local-reduce). Read from each report.json: the median step, the
algorithm that trained, S = gradient_bytes, and every host link's tx and rx
bytes per measured step against the model's. About 15 minutes on 2 cores.

    tools/topology_2x4.py [--bench B] [--rounds R] [--out DIR] [--results FILE] [--allow-dirty]

The file's first lines are tools/results_header.py's (a changed tree, or a
bench built from another commit, is refused). Figures are printed as
measured; nothing here decides what they mean."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import results_header  # noqa: E402  (the results files' first lines)

CONFIGS = [("hier", ["--mode", "ring", "--algo", "hier"]),
           ("ring", ["--mode", "ring", "--algo", "ring"]),
           ("local", ["--mode", "ps", "--ps-local-reduce"]),
           ("flat", ["--mode", "ps", "--no-ps-local-reduce"])]
COMMON = ["--hosts", "2", "--world", "8", "--link", "1gbit", "--model", "mlp:784-2048-2048-10",
          "--synthetic-samples", "2048", "--threads", "1", "--steps", "20", "--warmup", "4",
          "--repeat", "1", "--timeout", "120", "--quiet"]
BATCHES = [2, 16]


def run(bench, name, args, out):
    r = subprocess.run([bench] + args + COMMON + ["--out", out], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    if r.returncode:
        sys.exit(f"topology_2x4.py: {name} failed ({r.returncode}): {r.stderr[-1500:]}")
    rep = json.load(open(os.path.join(out, "report.json")))
    return rep["runs"][0]


def table(batch, runs):
    """the lines of one batch: every round's median step, the link bytes
    over S and against the model, and the two ratios"""
    lines = [f"## --batch {batch}"]
    med = {}
    for name, _ in CONFIGS:
        xs = runs[name]
        steps = [x["step_time_s_median"] for x in xs]
        med[name] = statistics.median(steps)
        lines.append(f"{name:6s} algo={xs[0]['algo']:13s} S={xs[0]['gradient_bytes']} rounds: " +
                     " ".join(f"{v:.3f}" for v in steps) + f"  median {med[name]:.3f}")
    for name, _ in CONFIGS:
        per_s, dev = [], []
        for x in runs[name]:
            for link in x["links"]:
                for way in ("tx", "rx"):
                    b = link[way + "_bytes"]
                    per_s.append(b / x["gradient_bytes"])
                    dev.append(b / link["model_" + way + "_bytes"] - 1)
        lines.append(f"{name:6s} link bytes / S: {min(per_s):.3f}-{max(per_s):.3f}; worst "
                     f"deviation from the model {100 * max(dev, key=abs):+.1f}%")
    lines.append(f"hier vs ring: {med['ring']:.3f} / {med['hier']:.3f} = "
                 f"{med['ring'] / med['hier']:.2f}x shorter steps")
    lines.append(f"local-reduce ps vs flat ps: {med['flat']:.3f} / {med['local']:.3f} = "
                 f"{med['flat'] / med['local']:.2f}x shorter steps")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=time.strftime("results/%Y%m%d-%H%M%S-topology"))
    ap.add_argument("--results")
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    lines = results_header.lines(" ".join(["tools/topology_2x4.py"] + sys.argv[1:]), a.bench,
                                 a.allow_dirty)
    load0, t0 = os.getloadavg(), time.time()
    body = []
    for batch in BATCHES:
        runs = {name: [] for name, _ in CONFIGS}
        for i in range(1, a.rounds + 1):
            for name, args in CONFIGS:
                out = os.path.join(a.out, f"{name}-b{batch}-{i}")
                print(f"topology_2x4.py: batch {batch}, round {i}: {name}", file=sys.stderr)
                runs[name].append(run(a.bench, name, args + ["--batch", str(batch)], out))
        body += [""] + table(batch, runs)
    load1 = os.getloadavg()
    lines += [f"# 2 emulated hosts of 4 ranks at 1 Gbit/s, {a.rounds} rounds, the 4 configurations "
              f"interleaved in each; load average {load0[0]:.1f} before, {load1[0]:.1f} after "
              f"({time.time() - t0:.0f} s). Each run (from the repository's root, as root):",
              "",
              "    " + " ".join([os.path.relpath(a.bench, ROOT), "CONFIG", "--batch", "B"] + COMMON +
                              ["--out", "DIR"]),
              "", "# CONFIG: " + "; ".join(f"{n}: {' '.join(c)}" for n, c in CONFIGS),
              "# steps: each run's median step (s); link bytes: every host link's tx and rx per "
              "measured step (veth counters) over S and against the model's"]
    text = "\n".join(lines + body) + "\n"
    dest = a.results or os.path.join(ROOT, "docs", "results",
                                     time.strftime("%Y-%m-%d-topology-2x4.txt"))
    results_header.write(dest, text)
    sys.stdout.write(text)
    print(f"topology_2x4.py: wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()
