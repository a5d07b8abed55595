#!/usr/bin/python3
"""results_header.py: the first lines of a results file under docs/results/,
the one rule every script that writes one follows (issue 46): a figure is
published only from a clean, committed tree, measured by a bench built from
that very commit. A tree with changes, or a bench whose --version names
another commit or carries the dirty mark (tools/git_revision.py), is refused
unless the caller passes allow_dirty, and then the lines say so.

The lines: "# command: ...", "# commit: SHA", "# machine: ...",
"# date: ...", "# bench: <bench --version's first line>".

As a module (Python scripts):   results_header.lines(command, bench, allow_dirty)
                                results_header.write(path, text): whole or not at all
As a program (shell scripts):   tools/results_header.py --bench B --command "..." [--allow-dirty]
                                prints the lines, or a message and exit 1."""
import argparse
import datetime
import os
import platform
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _run(args):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True)


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "?"


def lines(command, bench, allow_dirty=False):
    """the header's lines; SystemExit naming the problem when the figures
    would not be this commit's"""
    commit = _run(["git", "rev-parse", "HEAD"]).stdout.strip()
    if not commit:
        sys.exit("results_header.py: not in a git checkout: results name the commit that made them")
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    r = _run([bench, "--version"])
    version = (r.stdout.strip().splitlines() or ["?"])[0]
    built_here = r.returncode == 0 and f"(git {commit[:12]})" in version
    if not allow_dirty:
        if dirty:
            sys.exit("results_header.py: the work tree has changes (git status): commit them "
                     "first, so the results name the commit that made them (or --allow-dirty)")
        if not built_here:
            sys.exit(f"results_header.py: {bench} is '{version}', not a clean build of "
                     f"{commit[:12]}: rebuild it (ninja -C build), or --allow-dirty")
    now = datetime.datetime.now(datetime.timezone.utc)
    return [
        "# command: " + command,
        "# commit: %s%s" % (commit, " (with uncommitted changes)" if dirty else ""),
        "# machine: %s, %s, %d cores, %s" % (platform.node(), _cpu(), os.cpu_count(),
                                             platform.platform()),
        "# date: %s" % now.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "# bench: %s%s" % (version, "" if built_here else
                           " (not a clean build of this commit: --allow-dirty)"),
    ]


def write(path, text):
    """the results file whole or not at all: a temporary name, then a rename
    (a run stopped half way leaves the file it had)"""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--command", required=True, help="the command that writes the file, as run")
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    print("\n".join(lines(a.command, a.bench, a.allow_dirty)))


if __name__ == "__main__":
    main()
