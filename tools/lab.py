#!/usr/bin/python3
"""lab.py: a lab of docs/labs/ in one command: the bench runs it needs, then
its table, its chart and report.html in one directory.

    tools/lab.py NAME [--size small|full|smoke] [--out DIR] [--bench PATH]
    tools/lab.py --list

NAME is one of docs/labs/'s pages (allreduce-sizes, ddp-variants,
gather-allreduce-ddp, strong-scaling, master-link, straggler). --size:
small (the default) finishes within 5 minutes on a 2-core machine; full is
the course's full size; smoke is a seconds-long run that checks the lab
works here (the tests run it), its figures meaningless. The directory
(--out, else results/lab-NAME-<time>) gets table.csv, table.md, chart.svg,
report.html, and runs/, each bench run's own results and log.

A progress line is printed as each bench run starts and ends. bench is
build/bench/bench of this source tree, else `bench` on the PATH (--bench:
another). Labs on emulated hosts need root, as bench's --link does; without
it they stop with exit status 2 saying so. Exit status 1: a bench run
failed (its log's last lines are printed). Only the standard library is
needed (PyTorch, for Gloo beside gradsync in allreduce-sizes, where
/usr/bin/python3 has it)."""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_defs  # noqa: E402
import lab_report  # noqa: E402

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Failed(Exception):
    pass


class Lab:
    """one lab's run: bench, the size, the output directory, and the progress it prints"""

    def __init__(self, lab, bench, out, size, compute_ms):
        self.lab, self.bench_path, self.out, self.size = lab, bench, out, size
        self.compute_ms = compute_ms
        self.src, self.python = SRC, "/usr/bin/python3" if os.path.exists(
            "/usr/bin/python3") else sys.executable
        self.root = os.geteuid() == 0
        self.t0, self.n, self.runs = time.time(), 0, []

    def say(self, text):
        print(f"lab {self.lab['name']} [{time.time() - self.t0:5.0f} s] {text}", flush=True)

    def have_torch(self):
        if self.python == sys.executable:
            return importlib.util.find_spec("torch") is not None
        r = subprocess.run([self.python, "-c", "import torch"], capture_output=True)
        return r.returncode == 0

    def command(self, tag, argv, what):
        """run argv, its output to runs/TAG.log; its stdout returned"""
        self.n += 1
        log = os.path.join(self.out, "runs", tag + ".log")
        self.say(f"run {self.n}: {what} ...")
        t = time.time()
        with open(log, "w") as f:
            f.write("$ " + " ".join(argv) + "\n")
            f.flush()
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            f.write(r.stdout)
        if r.returncode != 0:
            tail = "\n".join(r.stdout.strip().splitlines()[-15:])
            raise Failed(f"run {self.n} ({what}) exited with status {r.returncode}; the end of "
                         f"{log}:\n{tail}")
        self.say(f"run {self.n}: done in {time.time() - t:.0f} s")
        return r.stdout

    def bench(self, tag, args, what):
        """bench ARGS --out runs/TAG; that directory returned"""
        d = os.path.join(self.out, "runs", tag)
        self.command(tag, [self.bench_path] + args + ["--out", d], what)
        self.runs.append((what, d))
        return d


def find_bench(given):
    if given:
        return os.path.abspath(given)
    mine = os.path.join(SRC, "build", "bench", "bench")
    if os.access(mine, os.X_OK):
        return mine
    return shutil.which("bench")


def main(argv):
    names = [x["name"] for x in lab_defs.LABS]
    ap = argparse.ArgumentParser(prog="lab.py", description="a lab of docs/labs/ in one command")
    ap.add_argument("name", nargs="?", help="one of: " + ", ".join(names))
    ap.add_argument("--size", choices=["small", "full", "smoke"], default="small",
                    help="small (default: within 5 minutes on 2 cores), full (the course's), "
                    "smoke (seconds: checks the lab runs here)")
    ap.add_argument("--out", help="results directory [results/lab-NAME-<time>]")
    ap.add_argument("--bench", help="the bench to run [build/bench/bench, else bench on PATH]")
    ap.add_argument("--compute-ms", type=float, help="gather-allreduce-ddp: VGG-11's emulated "
                    "compute per step [300]")
    ap.add_argument("--list", action="store_true", help="list the labs and stop")
    a = ap.parse_args(argv)
    if a.list or not a.name:
        for x in lab_defs.LABS:
            print(f"{x['name']:22s} {x['title']} ({x['course']})"
                  f"{'; needs root (emulated hosts)' if x['root'] else ''}")
        return 0 if a.list else 2
    lab = next((x for x in lab_defs.LABS if x["name"] == a.name), None)
    if not lab:
        print(f"lab.py: no lab '{a.name}'; the labs: {', '.join(names)}", file=sys.stderr)
        return 2
    bench = find_bench(a.bench)
    if not bench or not os.access(bench, os.X_OK):
        print("lab.py: no bench to run: build it (meson setup build && ninja -C build) or give "
              "--bench PATH", file=sys.stderr)
        return 2
    if lab["root"] and os.geteuid() != 0:
        print(f"lab.py: {a.name} runs on emulated hosts (network namespaces), which need root: "
              f"sudo {' '.join([sys.argv[0]] + argv)}", file=sys.stderr)
        return 2
    out = os.path.abspath(a.out or os.path.join(
        "results", f"lab-{a.name}-{time.strftime('%Y%m%d-%H%M%S')}"))
    runs = os.path.join(out, "runs")
    if os.path.exists(os.path.join(out, "table.csv")) or (os.path.isdir(runs) and os.listdir(runs)):
        print(f"lab.py: --out {out} already holds a lab's results: give a new directory, or move "
              "the old one away", file=sys.stderr)
        return 2
    os.makedirs(runs, exist_ok=True)
    c = Lab(lab, bench, out, a.size, a.compute_ms)
    c.say(f"{lab['title']} ({lab['course']}); size {a.size}; results in {out}")
    try:
        cols, rows, chart, notes = lab["fn"](c)
    except Failed as e:
        print(f"lab.py: {e}", file=sys.stderr)
        return 1
    version = subprocess.run([bench, "--version"], capture_output=True, text=True).stdout
    meta = [("course", lab["course"]), ("command", " ".join(["tools/lab.py"] + argv)),
            ("size", a.size), ("bench", version.splitlines()[0] if version else bench),
            ("wall time", f"{time.time() - c.t0:.0f} s")]
    lab_report.write(out, lab, cols, rows, chart, notes, c.runs, meta)
    print()
    print(lab_report.markdown(cols, rows))
    for n in notes:
        print("- " + n)
    print()
    c.say(f"done: {out}/table.md, table.csv, chart.svg, report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
