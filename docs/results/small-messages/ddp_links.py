#!/usr/bin/python3
"""ddp_links.py: issue 48's training goal as users measure it: gradsync's
ring against PyTorch DDP over Gloo on the same emulated links, in the same
invocation (`bench --peer torch` runs DDP's ranks on hosts placed as the
ring's), on 2 hosts at 1 Gbit/s and at 10 Gbit/s, in a communication-bound
configuration: a large MLP (mlp:784-4096-4096-10, 20.0 M parameters, 76.4 MiB
of gradients) at a small batch, so that a step is mostly its all-reduce.

  bench --mode ring --world 2 --hosts 2 --link RATE --peer torch \\
        --model mlp:784-4096-4096-10 --batch 16 --steps 12 --warmup 2 --threads 1 --repeat 1

Each invocation runs the ring, then DDP; the invocations alternate between
the links, REPS times, and the file keeps every invocation's throughput
(samples/s, as each reports it) and the medians, with the ring's over
DDP's. Writes docs/results/small-messages/<date>-ddp-links.txt, its first
lines from tools/results_header.py (a clean commit, bench built from it).

  docs/results/small-messages/ddp_links.py [--reps 3] [--links 1gbit,10gbit] [--allow-dirty]

Needs root (emulated hosts) and PyTorch for /usr/bin/python3."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import results_header  # noqa: E402

FLAGS = ["--mode", "ring", "--world", "2", "--hosts", "2", "--peer", "torch", "--model",
         "mlp:784-4096-4096-10", "--batch", "16", "--steps", "12", "--warmup", "2", "--threads",
         "1", "--repeat", "1", "--timeout", "300"]


def one(bench, link, out):
    """(ring samples/s, DDP samples/s, ring step ms, DDP step ms) of one invocation"""
    argv = [bench] + FLAGS + ["--link", link, "--out", out]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if r.returncode != 0:
        sys.exit(f"ddp_links.py: bench at --link {link} failed, exit {r.returncode}:\n"
                 f"{r.stdout[-1500:]}{r.stderr[-1500:]}")
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    run, peer = rep["runs"][0], (rep.get("peers") or [None])[0]
    if not peer or peer.get("network") != "emulated links":
        sys.exit(f"ddp_links.py: --link {link}: report.json has no DDP row on the emulated links")
    return (run["throughput_samples_per_s"], peer["throughput_samples_per_s"],
            1e3 * run["step_time_s_median"], 1e3 * peer["step_time_s_median"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--links", default="1gbit,10gbit")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/bench/bench"))
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("ddp_links.py: needs root (bench --hosts makes network namespaces)")
    links = a.links.split(",")
    cmd = "docs/results/small-messages/ddp_links.py" + "".join(" " + x for x in sys.argv[1:])
    head = results_header.lines(cmd, a.bench, a.allow_dirty)
    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="gs-ddp-links-")
    got = {l: [] for l in links}
    for rep in range(a.reps):
        for link in links:
            v = one(a.bench, link, os.path.join(tmp, f"{link}-{rep}"))
            got[link].append(v)
            print(f"{link}, invocation {rep + 1}: ring {v[0]:.1f}, DDP {v[1]:.1f} samples/s",
                  file=sys.stderr)
    text = head + [
        "# load average before, after: %.2f %.2f %.2f, %.2f %.2f %.2f" % (load_before + os.getloadavg()),
        "# bench " + " ".join(FLAGS) + " --link RATE",
        f"# {a.reps} invocations per link, alternating between the links; each runs the ring, then",
        "# PyTorch DDP (Gloo) on the same emulated hosts; samples/s as each reports it",
        "", "every invocation: link ring_samples_per_s ddp_samples_per_s ring_step_ms ddp_step_ms"]
    for link in links:
        text += [f"{link} {r:.1f} {d:.1f} {rs:.1f} {ds:.1f}" for r, d, rs, ds in got[link]]
    text += ["", "medians over the invocations",
             "| link | ring (samples/s) | PyTorch DDP, Gloo (samples/s) | ring / DDP | ring step (ms) | DDP step (ms) |",
             "|---|---|---|---|---|---|"]
    for link in links:
        m = [statistics.median(v[i] for v in got[link]) for i in range(4)]
        text.append(f"| {link} | {m[0]:.1f} | {m[1]:.1f} | {m[0] / m[1]:.2f} | {m[2]:.1f} | {m[3]:.1f} |")
    out = os.path.join(ROOT, "docs/results/small-messages",
                       head[3].split(": ", 1)[1][:10] + "-ddp-links.txt")
    results_header.write(out, "\n".join(text) + "\n")
    print("ddp_links.py: wrote " + os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
