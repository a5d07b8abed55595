#!/usr/bin/python3
"""byteps_goal.py: the measurement of docs/byteps.md (issue 44's goal): the
ring against BytePS' summation servers at k spare hosts on n emulated
workers' hosts, interleaved repetitions, medians.

It runs, from the repository's root and as root (emulated hosts):

    build/bench/bench --mode ring,ps --ps-spare-hosts 0,1,2,4 --world 4 --link 100mbit \\
        --model mlp:784-1024-1024-10 --batch 16 --steps 10 --warmup 3 --repeat R --out DIR

(bench's --repeat runs every configuration once, then again, R times: the
repetitions are interleaved), then reads DIR/report.json and writes the
results file: every repetition's step (median of its measured steps), the
medians and spreads per configuration, the ring's median step over the ps'
at each k beside BytePS' (n^2+kn-2k)/n^2, every link's bytes against its
share of the split, and the communication (from the first bucket's first
communication to the last's end, the mean over the measured steps and
ranks, bucket_timing) against t_opt (the busiest link's model bytes over
the link's rate: 2n(n-1)S / ((n^2+kn-2k) b)) and against the ring's.

    tools/byteps_goal.py [--bench B] [--repeat R] [--out DIR] [--from DIR]
                         [--results FILE] [--allow-dirty] [-- BENCH FLAGS...]

--from DIR reads a finished run instead of running one. The results file
names the commit; a tree with changes, or a bench built from another commit, is
refused (tools/results_header.py; --allow-dirty: marked so).
Figures are printed as measured; nothing here decides what they mean."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_header  # noqa: E402  (the results files' first lines)
FLAGS = ["--mode", "ring,ps", "--ps-spare-hosts", "0,1,2,4", "--world", "4", "--link", "100mbit",
         "--model", "mlp:784-1024-1024-10", "--batch", "16", "--steps", "10", "--warmup", "3"]
COUNTED = (1500.0 - 52) / (1500.0 + 14)  # what a link's counters show of its rate (hosts.c)


def comm_window(run):
    bt = run.get("bucket_timing") or {}
    b = bt.get("buckets") or []
    if not b:
        return None
    return max(x["comm_end_s"] for x in b) - min(x["comm_start_s"] for x in b)


def t_opt(run):
    """the busiest link direction's model bytes over that link's counted rate"""
    t = None
    for l in run["links"]:
        v = max(l["model_tx_bytes"], l["model_rx_bytes"]) / (l["rate_bps"] / 8 * COUNTED)
        t = v if t is None else max(t, v)
    return t


def label(run):
    return "ring" if run["mode"] == "ring" else f"ps k={run['ps_spare_hosts']}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--from", dest="src")
    ap.add_argument("--results")
    ap.add_argument("--allow-dirty", action="store_true")
    ap.add_argument("flags", nargs="*")
    a = ap.parse_args()
    flags = FLAGS + a.flags
    out = a.src or a.out or time.strftime("results/%Y%m%d-%H%M%S-byteps")
    cmd = [a.bench] + flags + ["--repeat", str(a.repeat), "--out", out]
    # refuses a dirty tree or a bench of another commit (--allow-dirty: marked)
    head = results_header.lines(" ".join(["tools/byteps_goal.py"] + sys.argv[1:]), a.bench,
                                a.allow_dirty)
    load0 = os.getloadavg()
    t0 = time.time()
    if not a.src:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"byteps_goal.py: bench failed ({r.returncode}): {r.stderr[-2000:]}")
    took = time.time() - t0
    load1 = os.getloadavg()
    rep = json.load(open(os.path.join(ROOT, out, "report.json")))
    runs = rep["runs"]
    lines = []
    p = lines.append
    lines += head
    p("# issue 44's goal, measured by tools/byteps_goal.py: the ring against BytePS' summation")
    p("# servers at k spare hosts, n = 4 workers' hosts, emulated at 100 Mbit/s (tbf), medians of")
    p("# interleaved repetitions (bench --repeat); report.json's version "
      f"{rep.get('environment', {}).get('git_revision', '?')}; load average {load0[0]:.1f} "
      f"before, {load1[0]:.1f} after ({took:.0f} s).")
    p("# bench's command (from the repository's root, as root):")
    p("")
    p("    " + " ".join([os.path.relpath(a.bench, ROOT)] + flags +
                        ["--repeat", str(a.repeat), "--out", out]))
    p("")
    p("## every repetition: step median (ms), in the order run")
    for x in runs:
        steps = ", ".join(f"{1e3 * v:.1f}" for v in x["repeats"]["step_time_s_median"])
        p(f"  {label(x):10s} {steps}")
    p("")
    ring = [x for x in runs if x["mode"] == "ring"]
    ring_step = ring[0]["step_time_s_median"] if ring else None
    ring_comm = comm_window(ring[0]) if ring else None
    p("## per configuration: the median repetition (the record report.json keeps)")
    p(f"  {'run':10s} {'step ms':>9s} {'min-max':>15s} {'ring/this':>9s} {'theory':>7s} "
      f"{'comm ms':>8s} {'t_opt ms':>8s} {'comm/t_opt':>10s} {'links vs share':>15s} "
      f"{'hidden':>7s}")
    n = 4
    for x in runs:
        st = x["repeats"]["step_time_s_median"]
        med = x["step_time_s_median"]
        k = x.get("ps_spare_hosts", -1)
        theory = f"{(n * n + k * n - 2 * k) / (n * n):.3f}x" if x["mode"] == "ps" else "1.000x"
        c, t = comm_window(x), t_opt(x)
        worst = max(abs(l[w + "_bytes"] / l["model_" + w + "_bytes"] - 1)
                    for l in x["links"] for w in ("tx", "rx"))
        bt = (x.get("bucket_timing") or {}).get("buckets") or []
        cs, hs = sum(b["comm_s"] for b in bt), sum(b["hidden_s"] for b in bt)
        p(f"  {label(x):10s} {1e3 * med:9.1f} {1e3 * min(st):7.1f}-{1e3 * max(st):<7.1f} "
          f"{ring_step / med:8.3f}x {theory:>7s} {1e3 * c:8.1f} {1e3 * t:8.1f} "
          f"{c / t:9.3f}x {100 * worst:13.2f}% {100 * hs / cs if cs else 0:6.1f}%")
    p("")
    p("  step: the median repetition's median step; ring/this: the ring's over this one's;")
    p("  theory: BytePS' (n^2+kn-2k)/n^2 (the ring's own is 1); comm: first communication to")
    p("  last, per step; t_opt: the busiest link's model bytes over its counted rate; links vs")
    p("  share: the largest |measured / model - 1| over every link and direction; hidden: the")
    p("  share of the communication spans' time under forward and backward (bucket_timing).")
    p("")
    p("## every link of the median repetitions (bytes per step)")
    for x in runs:
        p(f"  {label(x)}: " + "; ".join(
            f"host {l['host']} tx {l['tx_bytes']:.0f} rx {l['rx_bytes']:.0f} model "
            f"{l['model_tx_bytes']:.0f}" for l in x["links"]))
    text = "\n".join(lines) + "\n"
    dest = a.results or os.path.join(ROOT, "docs", "results",
                                     time.strftime("%Y-%m-%d-byteps-100mbit.txt"))
    results_header.write(dest, text)
    sys.stdout.write(text)
    print(f"wrote {dest}")
    if ring_comm is None:
        print("note: the ring had no bucket timing")


if __name__ == "__main__":
    main()
