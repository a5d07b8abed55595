#!/usr/bin/python3
"""results_links.py: what bench writes into a results directory that others
may share, and nothing outside it.

  - our launcher, --out DIR whose steps.csv is a link to a file elsewhere:
    refused, the file neither created nor written;
  - a job of another launcher (ranks started by hand), the same link:
    refused, the file neither created nor truncated;
  - such a job run again into a directory that holds a run: refused, the
    earlier run's steps.csv unchanged;
  - DIR/runs a link to a directory elsewhere: refused, nothing made there;
  - an SVG another user put into DIR, and a link named *.svg: not inlined
    into report.html.

    results_links.py BENCH"""
import hashlib
import os
import subprocess
import time

from gstest import BENCH, SMALL, check, finish, free_port, run, tmpdir

ARGS = SMALL + ["--steps", "5", "--world", "2", "--mode", "ring"]


def outside():
    """a file elsewhere, with content to lose"""
    d = tmpdir()
    f = os.path.join(d, "victim")
    with open(f, "w") as fh:
        fh.write("precious\n")
    return d, f


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def by_hand(out, extra=()):
    """a 2-rank job of another launcher; (rc, stderr) of each rank"""
    port = free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if k not in ("GS_LAUNCHED", "GS_PORT_FD")}
        env.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GS_JOB_SECRET="results links test secret")
        procs.append(subprocess.Popen([BENCH] + SMALL + ["--steps", "5", "--mode", "ring",
                                                         "--timeout", "8", "--out", out] +
                                      list(extra), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return [(p.wait(timeout=120), p.communicate()[1]) for p in procs]


# 1. our launcher, steps.csv a link to a file that does not exist yet, and
# to one that does
for exists in (False, True):
    d, victim = outside()
    if not exists:
        os.unlink(victim)
    out = tmpdir()
    os.symlink(victim, os.path.join(out, "steps.csv"))
    r = run(ARGS + ["--out", out])
    check(r.returncode != 0 and "steps.csv" in r.stderr,
          f"our launcher wrote through a steps.csv link: exit {r.returncode}, {r.stderr[-300:]}")
    check(os.path.exists(victim) == exists and (not exists or open(victim).read() == "precious\n"),
          f"our launcher created or changed {victim} through a link")

# 2. another launcher's job, the same link
d, victim = outside()
out = tmpdir()
os.symlink(victim, os.path.join(out, "steps.csv"))
res = by_hand(out)
check(res[0][0] != 0 and "steps.csv" in res[0][1], f"rank 0 wrote through a link: {res[0]}")
check(open(victim).read() == "precious\n", f"another launcher's rank 0 truncated {victim}")

# 3. another launcher's job, again into the same directory
out = tmpdir()
res = by_hand(out)
check(all(rc == 0 for rc, _ in res), f"a job by hand failed: {res}")
before = digest(os.path.join(out, "steps.csv"))
res = by_hand(out)
check(res[0][0] != 0 and "holds an earlier run" in res[0][1],
      f"a second job by hand into the same directory was not refused: {res[0]}")
check(digest(os.path.join(out, "steps.csv")) == before, "the earlier run's steps.csv changed")

# 4. runs/ a link to a directory elsewhere
elsewhere = tmpdir()
out = tmpdir()
os.symlink(elsewhere, os.path.join(out, "runs"))
r = run(ARGS + ["--out", out])
check(r.returncode != 0 and "runs" in r.stderr,
      f"bench wrote into a runs link: exit {r.returncode}, {r.stderr[-300:]}")
check(os.listdir(elsewhere) == [], f"bench made {os.listdir(elsewhere)} in {elsewhere}")

# 5. charts that someone else put there are not inlined
out = tmpdir()
planted = os.path.join(out, "zz-planted.svg")
with open(planted, "w") as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg"><script>alert("planted")</script></svg>\n')
if os.geteuid() == 0:
    os.chown(planted, 65534, 65534)
d, victim = outside()
with open(victim, "w") as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg"><text>linked secret</text></svg>\n')
os.symlink(victim, os.path.join(out, "zz-link.svg"))
r = run(ARGS + ["--out", out])
check(r.returncode == 0, f"bench into a directory with foreign charts: {r.stderr[-300:]}")
html = open(os.path.join(out, "report.html")).read()
check("linked secret" not in html, "report.html inlined a chart through a link")
check(os.geteuid() != 0 or 'alert("planted")' not in html,
      "report.html inlined another user's chart")
check("<svg" in html, "report.html inlined no chart at all")
finish("results_links")
