#!/usr/bin/python3
"""peer_torch.py: `bench --peer torch`, PyTorch DDP (gloo) beside ps and ring.

A ps,ring sweep at world 2 with --peer torch: report.json's "peers" holds
one row labelled "torch-ddp (gloo)" at world 2 with the sweep's model,
batch, steps, warm-up and threads, a positive throughput that is the global
batch over its measured steps' mean; the terminal comparison and
report.html show the row beside ps and ring. Without torch (a python that
cannot import it, through GS_PEER_PYTHON) the sweep stops before anything
starts: exit 2, a message naming --peer, no results directory. Skipped
(77) when /usr/bin/python3 cannot import torch.

    peer_torch.py BENCH"""
import json
import os
import subprocess
import sys

from gstest import SMALL, check, finish, run, tmpdir

if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                  capture_output=True).returncode != 0:
    print("peer_torch: skipped: /usr/bin/python3 cannot import torch")
    sys.exit(77)

d = tmpdir()
STEPS, WARMUP = 6, 2
r = run(SMALL + ["--mode", "ps,ring", "--world", "2", "--batch", "8", "--steps", str(STEPS),
                 "--warmup", str(WARMUP), "--peer", "torch", "--out", d])
check(r.returncode == 0, f"sweep with --peer torch: exit {r.returncode}: {r.stderr[-2000:]}")
rep = json.load(open(os.path.join(d, "report.json"))) if r.returncode == 0 else {}
peers = rep.get("peers", [])
check(len(peers) == 1, f"report.json peers: {peers}")
for p in peers:
    check(p.get("mode") == "torch-ddp (gloo)" and p.get("world") == 2 and p.get("batch") == 8
          and p.get("model") == "mlp:784-32-10" and p.get("steps") == STEPS and
          p.get("warmup_steps") == WARMUP and p.get("threads_per_rank") == 1,
          f"peer row: {p}")
    measured = p.get("step_time_s", [])[WARMUP:]
    tp = p.get("throughput_samples_per_s", 0)
    check(len(measured) == STEPS - WARMUP and tp > 0 and
          abs(tp - 16 * len(measured) / sum(measured)) <= 1e-6 * tp,
          f"peer throughput {tp} vs its steps {measured}")
row = [l for l in r.stdout.splitlines() if l.strip().startswith("torch-ddp (gloo)")]
check(len(row) == 1 and "mlp:784-32-10" in row[0], f"no peer row in the comparison:\n{r.stdout}")
check(any(l.strip().startswith("ps ") for l in r.stdout.splitlines()) and
      "the throughput of torch-ddp (gloo)" in r.stdout, "ps / ring not compared with the peer")
html = open(os.path.join(d, "report.html")).read() if r.returncode == 0 else ""
check("<td>torch-ddp (gloo)</td>" in html, "report.html: no peer row")

# torch missing: a usage error before anything starts
nd = os.path.join(tmpdir(), "never")
e = dict(os.environ, GS_PEER_PYTHON="/bin/false")
m = run(SMALL + ["--mode", "ring", "--world", "2", "--peer", "torch", "--out", nd], env=e)
check(m.returncode == 2 and "--peer torch" in m.stderr and "cannot import torch" in m.stderr
      and not os.path.exists(nd), f"without torch: exit {m.returncode}, {m.stderr.strip()}")
finish("peer_torch")
