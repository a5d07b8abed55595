#!/usr/bin/python3
"""bench_byteps.py BENCH CASE: BytePS' summation servers (--ps-spare-hosts) on
emulated hosts (root: network namespaces; skipped elsewhere, saying why).

  links   the ring and the ps at 0, 2 and 4 spare hosts beside 4 workers' hosts
          at 100 Mbit/s: links[] lists the workers' hosts and then every spare
          host (4 + k rows); every link's model bytes are BytePS' share,
          2n(n-1)/(n^2+kn-2k) S each way; every link's counters carry its
          share within 3% (protocol headers, acknowledgements) and no link
          carries a tenth more than another (the split is even); the run's
          spare.svg is drawn; nothing of the runs is left behind
  kill    a spare host's server SIGKILLed: every rank names it within a
          quarter of --timeout; nothing of the run is left

    bench_byteps.py BENCH links|kill"""
import ctypes
import os
import re
import signal
import subprocess
import sys
import time

from gstest import (BENCH, SMALL, check, finish, need_root, report, run, run_procs, snapshot,
                    tmpdir, wait_clean, wait_rows)

CASE = sys.argv[2]
FLAGS = [x for x in SMALL if x not in ("--link", "none")] + [
    "--model", "mlp:784-256-256-10", "--batch", "16", "--steps", "12", "--warmup", "2",
    "--world", "4", "--link", "100mbit", "--ps-partition-mb", "0.125"]


def subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: the orphans are ours


def case_links():
    need_root()
    check(subreaper(), "cannot become a subreaper")
    before = snapshot()
    d = tmpdir()
    r = run(FLAGS + ["--mode", "ring,ps", "--ps-spare-hosts", "0,2,4", "--out", d], timeout=400)
    wait_clean(before, set(), [], "the runs of ring and ps at 0, 2 and 4 spare hosts")
    if not check(r.returncode == 0, f"ring,ps --ps-spare-hosts 0,2,4: {r.stderr}"):
        return
    runs = report(d)["runs"]
    n = 4
    for x in runs:
        if x["mode"] != "ps":
            continue
        k = x["ps_spare_hosts"]
        S = x["gradient_bytes"]
        share = 2 * n * (n - 1) / (n * n + k * n - 2 * k) * S
        links = x["links"]
        what = f"ps at {k} spare hosts"
        check([l["host"] for l in links] == list(range(n + k)),
              f"{what}: links of hosts {[l['host'] for l in links]}, not 0..{n + k - 1}")
        for l in links:
            for way in ("tx", "rx"):
                model, got = l["model_" + way + "_bytes"], l[way + "_bytes"]
                check(model is not None and abs(model / share - 1) < 1e-9,
                      f"{what}: host {l['host']} {way}: the model's {model}, BytePS' {share:.0f}")
                check(abs(got / share - 1) <= 0.03,
                      f"{what}: host {l['host']} {way}: {got:.0f} bytes/step, its share "
                      f"{share:.0f} ({100 * (got / share - 1):+.1f}%)")
        carried = [l["rx_bytes"] for l in links] + [l["tx_bytes"] for l in links]
        check(max(carried) < 1.1 * min(carried), f"{what}: the links carry unevenly: {carried}")
    check(os.path.exists(os.path.join(d, "spare.svg")), "no spare.svg")


def case_kill():
    need_root()
    check(subreaper(), "cannot become a subreaper")
    before = snapshot()
    T = 4.0
    d = tmpdir()
    p = subprocess.Popen([BENCH] + FLAGS + ["--mode", "ps", "--ps-spare-hosts", "2", "--steps",
                                            "100000", "--timeout", str(T), "--out", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_rows(d, 4 * 4)
        victims = [pid for pid, k in run_procs(d).items() if k == "0"]
        if check(len(victims) == 1, f"no spare host's server 0: {run_procs(d)}"):
            os.kill(victims[0], signal.SIGKILL)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(p.returncode != 0, f"the launcher exited {p.returncode}")
    for r in range(4):
        m = re.search(rf"bench: rank {r}:.*summation server 0 of \d+ \([^)]*a process of its "
                      r"own\) closed its connection in step \d+ and has not taken one back in "
                      r"([\d.]+) s", err)
        check(m and float(m.group(1)) <= T / 4 + 0.5,
              f"rank {r} did not name the dead spare host's server within {T / 4} s: {err}")
    wait_clean(before, set(), [], "the run with a killed spare host's server")


{"links": case_links, "kill": case_kill}[CASE]()
finish("BytePS on emulated hosts")
