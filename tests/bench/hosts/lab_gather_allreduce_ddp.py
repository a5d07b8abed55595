#!/usr/bin/python3
"""lab_gather_allreduce_ddp.py BENCH: docs/labs/gather-allreduce-ddp.md's
command, short (tools/lab.py gather-allreduce-ddp --size smoke: VGG-11's
gradient shapes on 4 emulated hosts, 5 ms of emulated compute, 3 steps a
run; root, else skipped): it ends well, prints a progress line per bench
run, and its table has the four variants with a positive step, every
host's bytes each way and host 0's link busy share; the bytes are the
patterns' (gather/scatter: host 0 carries about 3x a worker's; the
all-reduces and DDP: every host about 1.5x the model's 35.2 MiB each way:
received within 10%, sent up to 25% over, retransmissions counted);
its chart, table.md and report.html exist. Without root the lab stops with
exit status 2 saying why (checked where this runs as root by dropping to
nobody)."""
import os
import shutil
import subprocess
import sys

from gstest import BENCH, LAB_TOOL, check, finish, lab, lab_shape, need_root, tmpdir

need_root()
COLS = ["variant", "step (ms, median)"]
for h in range(4):
    COLS += [f"host {h} sent (MiB/step)", f"host {h} received (MiB/step)"]
COLS.append("host 0's link busy (%)")
r, d, head, rows = lab("gather-allreduce-ddp")
lab_shape("gather-allreduce-ddp", r, d, head, rows, COLS, 4, COLS[1:])
S = 9231114 * 4 / 2 ** 20
if len(rows) == 4 and head == COLS:
    check([x[0] for x in rows] == ["gather/scatter to rank 0 (ps)", "all_reduce per parameter",
                                   "one all_reduce of every gradient",
                                   "DDP (25 MiB buckets, overlap)"], f"variants {rows}")
    # (sent, received) per host; what a receiver counted is what crossed, within
    # 10%; a sender's counter also counts its retransmissions and the headers
    # of packets a loaded machine sends smaller (host 0 of gather/scatter sent
    # 1.12x its payload in one CI run), so sent may be up to 25% over
    def carries(v, want):
        return all(0.9 <= v[2 * h] / want[h] <= 1.25 and abs(v[2 * h + 1] / want[h] - 1) < 0.1
                   for h in range(4))
    g = [float(v) for v in rows[0][2:10]]
    check(carries(g, [3 * S, S, S, S]),
          f"gather/scatter: host 0 carries 3 S, the workers S each way (S {S:.1f} MiB): {g}")
    for x in rows[1:]:
        v = [float(v) for v in x[2:10]]
        check(carries(v, [1.5 * S] * 4),
              f"{x[0]}: every host carries 1.5 S each way (S {S:.1f} MiB): {v}")
# not root: exit 2 naming root, before any run. nobody runs a copy of the lab
# scripts and of bench in a folder it may enter: the tree may lie where only root
# can (a clone in `mktemp -d`), which is not what this case tests
theirs = tmpdir()
os.chmod(theirs, 0o755)
for name in ("lab.py", "lab_defs.py", "lab_report.py"):
    shutil.copy(os.path.join(os.path.dirname(LAB_TOOL), name), theirs)
    os.chmod(os.path.join(theirs, name), 0o644)
exe = os.path.join(theirs, "bench")
shutil.copy(BENCH, exe)
os.chmod(exe, 0o755)
nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         sys.executable, os.path.join(theirs, "lab.py"), "gather-allreduce-ddp",
                         "--bench", exe,
                         "--out", "/tmp/gs-lab-nobody-never"], capture_output=True, text=True,
                        timeout=60)
check(nobody.returncode == 2 and "need root" in nobody.stderr and
      not os.path.exists("/tmp/gs-lab-nobody-never"),
      f"not root: exit {nobody.returncode}, {nobody.stderr.strip()}")
finish("lab_gather_allreduce_ddp")
