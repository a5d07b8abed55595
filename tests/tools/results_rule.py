#!/usr/bin/python3
"""results_rule.py: tools/results_header.py, the first lines of every
results file and the rule behind them, on a clone of this repository:

  - a clean tree and a bench whose --version names HEAD: five lines
    (command, commit, machine, date, bench), exit 0;
  - a bench built from another commit, or carrying the dirty mark: refused
    (exit 1, naming the bench and HEAD);
  - a tracked file changed: refused, naming the change; with --allow-dirty
    the lines say "(with uncommitted changes)".

The bench is a stand-in script that prints a --version line, so no build
of the clone is needed. Skipped (77) outside a git checkout.

    results_rule.py BENCH   (BENCH unused: the tests' common arguments)"""
import os
import shutil
import subprocess
import sys

from gstest import check, finish, tmpdir

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


if not shutil.which("git") or git("rev-parse", "HEAD", cwd=ROOT).returncode != 0:
    print("results_rule: skipped: this source tree is not a git checkout (or git is missing)")
    sys.exit(77)

t = tmpdir()
repo = os.path.join(t, "repo")
c = git("clone", "-q", "--no-hardlinks", ROOT, repo, cwd=ROOT)
if not check(c.returncode == 0, f"git clone {ROOT}: {c.stderr[-300:]}"):
    finish("results_rule")
sha = git("rev-parse", "HEAD", cwd=repo).stdout.strip()


def fake_bench(name, version):
    path = os.path.join(t, name)
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho '{version}'\n")
    os.chmod(path, 0o755)
    return path


def header(bench, *extra):
    return subprocess.run([sys.executable, os.path.join(repo, "tools", "results_header.py"),
                           "--bench", bench, "--command", "made by results_rule", *extra],
                          cwd=repo, capture_output=True, text=True)


good = fake_bench("good", f"gradsync 0.1.0 (git {sha[:12]}), release build")
r = header(good)
out = r.stdout.splitlines()
check(r.returncode == 0 and len(out) == 5, f"a clean tree and its bench: exit {r.returncode}, "
      f"{len(out)} lines: {r.stdout}{r.stderr}")
for want in ("# command: made by results_rule", f"# commit: {sha}", "# machine: ", "# date: ",
             f"# bench: gradsync 0.1.0 (git {sha[:12]})"):
    check(any(l.startswith(want) for l in out), f"no line '{want}...' in: {r.stdout}")
check(not any("uncommitted" in l or "not a clean build" in l for l in out),
      f"a clean run marked as not clean: {r.stdout}")

for name, version in (("other", "gradsync 0.1.0 (git 0123456789ab), release build"),
                      ("dirty", f"gradsync 0.1.0 (git {sha[:12]}+dirty:1a2b3c4d), release build")):
    r = header(fake_bench(name, version))
    check(r.returncode == 1 and "not a clean build" in r.stderr and sha[:12] in r.stderr,
          f"a bench of {name} build: exit {r.returncode}, expected 1 naming HEAD: {r.stderr}")

with open(os.path.join(repo, "README.md"), "a") as f:
    f.write("a change\n")
r = header(good)
check(r.returncode == 1 and "changes" in r.stderr,
      f"a changed tree: exit {r.returncode}, expected 1 naming the change: {r.stderr}")
r = header(good, "--allow-dirty")
check(r.returncode == 0 and f"# commit: {sha} (with uncommitted changes)" in r.stdout,
      f"--allow-dirty on a changed tree: exit {r.returncode}, not marked: {r.stdout}{r.stderr}")
finish("results_rule")
