#!/usr/bin/python3
"""default_run.py: the README's first figures: `build/bench/bench` with no
flags (as root, so on emulated hosts), its whole output (stdout, then
stderr) into docs/results/<date>-default-run.txt and the charts the README
and docs/measurements.md show into docs/default/ (hosts, links, breakdown,
and the world-4 timelines of ps and ring).

    tools/default_run.py [--bench B] [--out DIR] [--results FILE] [--allow-dirty]

The file's first lines are tools/results_header.py's (a changed tree, or a
bench built from another commit, is refused). A few minutes on 2 cores."""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import results_header  # noqa: E402  (the results files' first lines)

CHARTS = ["hosts.svg", "links.svg", "breakdown.svg"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--out", default=time.strftime("results/%Y%m%d-%H%M%S-default"))
    ap.add_argument("--results")
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    lines = results_header.lines(" ".join(["tools/default_run.py"] + sys.argv[1:]), a.bench,
                                 a.allow_dirty)
    load0, t0 = os.getloadavg(), time.time()
    r = subprocess.run([a.bench, "--out", a.out], cwd=ROOT, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode:
        sys.exit(f"default_run.py: bench failed ({r.returncode}): {r.stderr[-1500:]}")
    load1 = os.getloadavg()
    lines += [f"# {os.path.relpath(a.bench, ROOT)} --out {a.out}: stdout, then stderr; load "
              f"average {load0[0]:.1f} before, {load1[0]:.1f} after ({time.time() - t0:.0f} s)", ""]
    out = os.path.join(ROOT, a.out)
    charts = [(os.path.join(out, c), c) for c in CHARTS]
    for mode in ("ps", "ring"):
        found = sorted(glob.glob(os.path.join(out, f"timeline-{mode}-w4-*.svg")))
        if not found:
            sys.exit(f"default_run.py: the run drew no timeline of {mode} at world 4 in {out}")
        charts.append((found[0], f"timeline-{mode}-w4.svg"))
    for src, name in charts:
        if not os.path.exists(src):
            sys.exit(f"default_run.py: the run drew no {name} in {out}")
    results_header.write(os.path.join(ROOT, a.results) if a.results else
                         os.path.join(ROOT, "docs", "results",
                                      time.strftime("%Y-%m-%d-default-run.txt")),
                         "\n".join(lines) + "\n" + r.stdout + r.stderr)
    for src, name in charts:
        shutil.copyfile(src, os.path.join(ROOT, "docs", "default", name))
    print("default_run.py: wrote the results file and docs/default/: " +
          ", ".join(n for _, n in charts), file=sys.stderr)


if __name__ == "__main__":
    main()
