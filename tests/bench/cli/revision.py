#!/usr/bin/python3
"""revision.py: the built bench names the tree it was built from, the same
way everywhere it does (tools/git_revision.py states the rule).

  - bench --version's first line is
    "gradsync X.Y.Z (git MARK), BUILDTYPE build", MARK one of
    "<12 hex digits>", "<12 hex digits>+dirty:<8 hex digits>", "unknown";
  - a sweep's console header begins "gradsync X.Y.Z (git MARK): " with the
    same MARK, and its report.json has environment.git_revision == MARK
    and environment.git_dirty true for a +dirty mark, false for a commit,
    null for "unknown";
  - a rank started by hand writes the same into its report.json.

Nothing is built here: the binary under test is the one meson built.

    revision.py BENCH"""
import re

from gstest import SMALL, check, finish, free_port, report, run, tmpdir

MARK = r"(?:[0-9a-f]{12}(?:\+dirty:[0-9a-f]{8})?|unknown)"
VERSION = re.compile(r"^gradsync (\d+\.\d+\.\d+) \(git (" + MARK + r")\), (\w+) build$")
HEADER = re.compile(r"^gradsync (\d+\.\d+\.\d+) \(git (" + MARK + r")\): CPU code path ")


def dirty_of(mark):
    return None if mark == "unknown" else "+dirty:" in mark


v = run(["--version"])
first = v.stdout.splitlines()[0] if v.stdout else ""
m = VERSION.match(first)
check(v.returncode == 0 and m, f"bench --version's first line {first!r} is not "
      "'gradsync X.Y.Z (git MARK), TYPE build'")
version, mark = (m[1], m[2]) if m else ("", "")

# the sweep's header and its report.json
d = tmpdir()
args = [a for a in SMALL if a != "--quiet"]
r = run(args + ["--mode", "ps", "--world", "1", "--steps", "2", "--out", d])
first = r.stdout.splitlines()[0] if r.stdout else ""
h = HEADER.match(first)
check(r.returncode == 0 and h, f"the console header {first!r} is not "
      f"'gradsync X.Y.Z (git MARK): CPU code path ...' (exit {r.returncode}, {r.stderr[-300:]})")
check(not h or (h[1], h[2]) == (version, mark),
      f"the console header says {h and h.group(0)!r}, bench --version {version} (git {mark})")
if r.returncode == 0:
    env = report(d).get("environment", {})
    check(env.get("git_revision") == mark,
          f"report.json git_revision {env.get('git_revision')!r}, bench --version {mark!r}")
    check("git_dirty" in env and env["git_dirty"] is dirty_of(mark),
          f"report.json git_dirty {env.get('git_dirty', 'absent')!r} for the mark {mark!r}")

# a rank started by hand (world 1: no peer to wait for)
d = tmpdir()
r = run(SMALL + ["--mode", "ps", "--steps", "2", "--out", d],
        env={"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(free_port())})
if check(r.returncode == 0, f"a rank by hand: exit {r.returncode}, {r.stderr[-300:]}"):
    env = report(d).get("environment", {})
    check(env.get("git_revision") == mark and env.get("git_dirty", "absent") is dirty_of(mark),
          f"a rank by hand: report.json git_revision {env.get('git_revision')!r}, git_dirty "
          f"{env.get('git_dirty', 'absent')!r}, bench --version {mark!r}")
print(f"revision: bench {version}, git {mark}")
finish("revision")
