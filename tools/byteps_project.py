#!/usr/bin/python3
"""byteps_project.py: docs/byteps.md's prediction, "how many spare CPU hosts
should this job have": bench --project over --ps-spare-hosts 0..4 for
resnet50 with the P100 calibration of docs/examples on 4 hosts, at a link the
gradients fill (1 Gbit/s) and at one the compute hides (10 Gbit/s), into
docs/results/<date>-byteps-project.txt. No rank runs (the cost model only),
so any machine gives the same table.

    tools/byteps_project.py [--bench B] [--results FILE] [--allow-dirty]

The file's first lines are tools/results_header.py's (a dirty tree, or a
bench built from another commit, is refused)."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import results_header  # noqa: E402  (the results files' first lines)

FLAGS = ["--project", "--calibration", "docs/examples/calibration-p100-resnet50.json",
         "--world", "4", "--model", "resnet50", "--ps-spare-hosts", "0,1,2,3,4"]
LINKS = ["1gbit", "10gbit"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench"))
    ap.add_argument("--results")
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    lines = results_header.lines(" ".join(["tools/byteps_project.py"] + sys.argv[1:]),
                                 a.bench, a.allow_dirty)
    bench = os.path.relpath(a.bench, ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        for link in LINKS:
            cmd = [a.bench] + FLAGS + ["--link", link, "--out", os.path.join(tmp, link)]
            r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
            if r.returncode:
                sys.exit(f"byteps_project.py: bench --project at {link} failed "
                         f"({r.returncode}): {r.stderr[-1500:]}")
            lines += ["", "$ " + " ".join([bench] + FLAGS + ["--link", link, "--out", "DIR"]),
                      r.stdout.replace(tmp + "/", "").rstrip()]
    text = "\n".join(lines) + "\n"
    dest = a.results or os.path.join(ROOT, "docs", "results",
                                     time.strftime("%Y-%m-%d-byteps-project.txt"))
    results_header.write(dest, text)
    print(f"byteps_project.py: wrote {dest}")


if __name__ == "__main__":
    main()
