#!/usr/bin/python3
"""peer_torch_hosts.py: `bench --peer torch` on emulated links: PyTorch DDP
(Gloo) runs on the emulated hosts, so its gradients cross the same links
as the ring's.

A ring sweep at world 2 on 1 Gbit/s links with --peer torch: the peer's
row in report.json says "emulated links" and lists both hosts' links, and
each host's link carried what DDP must send: every step, an all-reduce of
the model's S gradient bytes, of which each of the 2 ranks sends S (and
rank 0 first broadcasts the S bytes of the parameters): at least 0.95 x
steps x S up each link, at most 1.25 x (steps + 1) x S. Over loopback the
links would carry nothing: the bytes are the veth counters'. The
comparison's peer row counts its 2 hosts. Skipped (77) without root
(CAP_NET_ADMIN, CAP_SYS_ADMIN) or when /usr/bin/python3 cannot import
torch.

    peer_torch_hosts.py BENCH"""
import json
import os
import subprocess
import sys

from gstest import check, finish, need_root, run, tmpdir

if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                  capture_output=True).returncode != 0:
    print("peer_torch_hosts: skipped: /usr/bin/python3 cannot import torch")
    sys.exit(77)
need_root()

d = tmpdir()
STEPS, WARMUP, SIZES = 6, 2, (784, 256, 10)
S = 4 * sum(a * b + b for a, b in zip(SIZES, SIZES[1:]))  # fp32 weights and biases
r = run(["--model", "mlp:" + "-".join(map(str, SIZES)), "--synthetic-samples", "2048",
         "--threads", "1", "--timeout", "60", "--quiet", "--repeat", "1", "--mode", "ring",
         "--world", "2", "--link", "1gbit", "--batch", "8", "--steps", str(STEPS), "--warmup",
         str(WARMUP), "--peer", "torch", "--out", d])
check(r.returncode == 0, f"ring on links with --peer torch: exit {r.returncode}: "
      f"{r.stderr[-2000:]}")
rep = json.load(open(os.path.join(d, "report.json"))) if r.returncode == 0 else {}
peers = rep.get("peers", [])
check(len(peers) == 1, f"report.json peers: {peers}")
for p in peers:
    links = p.get("links", [])
    check(p.get("network") == "emulated links" and len(links) == 2 and
          sorted(l.get("host") for l in links) == [0, 1], f"peer row: {p}")
    for l in links:
        up = l.get("up_bytes", 0)
        check(0.95 * STEPS * S <= up <= 1.25 * (STEPS + 1) * S,
              f"host {l.get('host')}'s link carried {up} bytes up while DDP ran {STEPS} steps "
              f"of {S} gradient bytes (allowed {0.95 * STEPS * S:.0f}..{1.25 * (STEPS + 1) * S:.0f})")
row = [l.split() for l in r.stdout.splitlines() if l.strip().startswith("torch-ddp (gloo)")]
check(len(row) == 1 and row[0][3:6] == ["8", "2", "2"],
      f"the comparison's peer row (batch, world, hosts): {row}\n{r.stdout}")
finish("peer_torch_hosts")
