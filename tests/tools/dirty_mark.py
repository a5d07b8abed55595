#!/usr/bin/python3
"""dirty_mark.py: tools/git_revision.py, the mark every build of bench
carries, on a copy of this repository (a local git clone in a temporary
folder), changed step by step:

  - as cloned: "<commit>", HEAD's 12 hex digits;
  - a tracked file changed: "<commit>+dirty:<8 hex digits>"; changed
    otherwise: another hash; changed back: the first hash again (the hash
    is of the difference, not of the time); the change staged: the same;
  - the change undone: "<commit>" again;
  - an untracked file git does not ignore: dirty, its contents in the
    hash; an ignored one (under build/): clean;
  - a folder outside git: "unknown".

Skipped (77) where this source tree is not a git checkout, or git is
missing.

    dirty_mark.py BENCH   (BENCH unused: the tests' common arguments)"""
import os
import re
import shutil
import subprocess
import sys

from gstest import check, finish, tmpdir

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "git_revision.py")


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def mark(where):
    r = subprocess.run([sys.executable, TOOL, where], capture_output=True, text=True)
    check(r.returncode == 0, f"git_revision.py {where}: exit {r.returncode}, {r.stderr[-300:]}")
    return r.stdout.strip()


if not shutil.which("git") or git("rev-parse", "HEAD", cwd=ROOT).returncode != 0:
    print("dirty_mark: skipped: this source tree is not a git checkout (or git is missing), "
          "so there is no repository to copy")
    sys.exit(77)

repo = os.path.join(tmpdir(), "repo")
c = git("clone", "-q", "--no-hardlinks", ROOT, repo, cwd=ROOT)
if not check(c.returncode == 0, f"git clone {ROOT}: {c.stderr[-300:]}"):
    finish("dirty_mark")
head = git("rev-parse", "--short=12", "HEAD", cwd=repo).stdout.strip()
DIRTY = re.compile(r"^" + re.escape(head) + r"\+dirty:([0-9a-f]{8})$")

clean = mark(repo)
check(clean == head, f"a fresh clone: {clean!r}, want {head!r}")

readme = os.path.join(repo, "README.md")
original = open(readme, "rb").read()
with open(readme, "ab") as f:
    f.write(b"\none more line\n")
one = mark(repo)
m1 = DIRTY.match(one)
check(m1, f"README.md changed: {one!r}, want {head}+dirty:<8 hex digits>")
with open(readme, "wb") as f:
    f.write(original + b"\nanother line\n")
two = mark(repo)
m2 = DIRTY.match(two)
check(m2 and two != one,
      f"README.md changed otherwise: {two!r}, after {one!r}: the hash must differ")
with open(readme, "wb") as f:
    f.write(original + b"\none more line\n")
check(mark(repo) == one, f"the first change again: {mark(repo)!r}, want {one!r}")
git("add", "README.md", cwd=repo)
check(mark(repo) == one, f"the change staged: {mark(repo)!r}, want {one!r} (git diff HEAD)")
git("reset", "-q", "HEAD", "README.md", cwd=repo)
with open(readme, "wb") as f:
    f.write(original)
check(mark(repo) == head, f"the change undone: {mark(repo)!r}, want {head!r}")

new = os.path.join(repo, "docs", "untracked-note.md")
with open(new, "w") as f:
    f.write("a file git does not know\n")
three = mark(repo)
check(DIRTY.match(three), f"an untracked file: {three!r}, want {head}+dirty:<hash>")
with open(new, "w") as f:
    f.write("a file git does not know, changed\n")
four = mark(repo)
check(DIRTY.match(four) and four != three,
      f"the untracked file's contents changed: {four!r}, after {three!r}: the hash must differ")
os.unlink(new)
os.makedirs(os.path.join(repo, "build"), exist_ok=True)
with open(os.path.join(repo, "build", "ignored.txt"), "w") as f:
    f.write("build output\n")
check(mark(repo) == head, f"only an ignored file (build/): {mark(repo)!r}, want {head!r}")

outside = tmpdir()
check(mark(outside) == "unknown", f"a folder outside git: {mark(outside)!r}, want 'unknown'")
print(f"dirty_mark: clean {clean}, changed {one} / {two}, untracked {three} / {four}")
finish("dirty_mark")
