#!/usr/bin/python3
"""bench_host_cpus.py BENCH CASE: emulated hosts with a cap on their CPU
(--host-cpus CORES, a CFS quota per host as Mininet's CPULimitedHost).

  bad   values bench refuses with exit 2 and a message naming --host-cpus:
        no --link, fewer than 0.1 cores, more than this machine has, not a
        number. Runs everywhere (nothing is built).
  run   the ring at world 2 over --link 1gbit, uncapped and then with
        --host-cpus 0.15: report.json has config.host_cpus and the header's
        sentence says "0.15 cores each"; the capped ranks' compute per step
        is at least 1.5x the uncapped ones' (a rank alone on a host of 0.15
        cores computes about 1/0.15 as long as on a core of its own), and
        the machine's cgroup hierarchy holds no group of the run afterwards.
        Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN) and the cgroup cpu
        controller, else exit 77 saying why."""
import glob
import os
import sys

from gstest import SMALL, check, finish, need_root, refused, report, run, tmpdir

CASE = sys.argv[2]
BASE = [a for a in SMALL if a not in ("--link", "none")]
BASE = BASE[:BASE.index("--model")] + BASE[BASE.index("--model") + 2:]
BASE += ["--model", "mlp:784-256-10", "--steps", "6", "--warmup", "1", "--batch", "512",
         "--threads", "1"]


def orphans():
    """groups whose maker is gone: a run's, left behind (another test's live
    cluster has a group too, named after its live maker)"""
    out = []
    for g in glob.glob("/sys/fs/cgroup/*/gradsync-*") + glob.glob("/sys/fs/cgroup/gradsync-*"):
        pid = int(os.path.basename(g).split("-")[1])
        if not os.path.exists(f"/proc/{pid}"):
            out.append(g)
    return sorted(out)


def case_bad():
    for flags, why in (
            (["--host-cpus", "0.5"], "--link"),
            (["--link", "1gbit", "--world", "2", "--host-cpus", "0.05"], "0.1 up"),
            (["--link", "1gbit", "--world", "2", "--host-cpus", "1000"], "at most"),
            (["--link", "1gbit", "--world", "2", "--host-cpus", "half"], "half")):
        refused(BASE + ["--mode", "ring"] + flags, "--host-cpus", why)


def case_run():
    need_root()
    before = orphans()
    got = {}
    for name, extra in (("free", []), ("capped", ["--host-cpus", "0.15"])):
        d = tmpdir()
        r = run(BASE + ["--mode", "ring", "--world", "2", "--link", "1gbit", "--out", d] + extra)
        if name == "capped" and r.returncode != 0 and "cpu controller" in r.stderr:
            print("SKIP: " + [l for l in r.stderr.splitlines() if "cpu controller" in l][0])
            sys.exit(77)
        if not check(r.returncode == 0, f"ring world 2, {name}: {r.stderr}"):
            continue
        rep = report(d)
        got[name] = rep["runs"][0]
        want = 0.15 if name == "capped" else 0
        check(rep["config"]["host_cpus"] == want,
              f"config.host_cpus is {want}: {rep['config'].get('host_cpus')!r}")
        sentence = rep["links_chosen"]["sentence"]
        check(("0.15 cores each" in sentence) == (name == "capped"),
              f"the sentence says the cap only when there is one: {sentence}")
    if len(got) == 2:
        f = [x["compute_s"] for x in got["free"]["per_rank"]]
        c = [x["compute_s"] for x in got["capped"]["per_rank"]]
        print("compute per step (ms): free %s, capped at 0.15 cores %s" %
              ([round(x * 1e3, 2) for x in f], [round(x * 1e3, 2) for x in c]))
        check(min(c) >= 1.5 * max(f), "every capped rank computes at least 1.5x as long as "
              f"every free one: {c} vs {f}")
    left = sorted(set(orphans()) - set(before))
    check(not left, f"no cgroup of the run is left: {left}")


{"bad": case_bad, "run": case_run}[CASE]()
finish("bench_host_cpus " + CASE)
