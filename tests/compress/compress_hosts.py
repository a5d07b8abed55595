#!/usr/bin/python3
"""compress_hosts.py BENCH: --compress powersgd on emulated hosts (--hosts 4,
1 Gbit/s links): what each host's link carried (its veth counters, not the
program's own sums) per measured step is at least 10x less than in the same
run uncompressed, and the program's own byte counters agree with the links.
Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN), else exits 77 (skip) saying so."""
import os

from gstest import check, finish, need_root, report, run, tmpdir

need_root()
tmp = tmpdir()


def train(tag, extra):
    d = os.path.join(tmp, tag)
    r = run(["--mode", "ring", "--world", "4", "--hosts", "4", "--link", "1gbit", "--model",
             "mlp:784-1024-1024-10", "--steps", "6", "--warmup", "2", "--repeat", "1",
             "--threads", "1", "--timeout", "30", "--quiet", "--out", d] + extra, timeout=240)
    if not check(r.returncode == 0, f"{tag}: exit {r.returncode}: {r.stderr[-2000:]}"):
        return None
    return report(d)["runs"][0]


plain = train("plain", [])
psgd = train("powersgd", ["--compress", "powersgd:2", "--powersgd-start", "0"])
if plain and psgd:
    for name, r in (("plain", plain), ("powersgd:2", psgd)):
        tx = [l["tx_bytes"] for l in r["links"]]
        own = [p["bytes_sent"] for p in r["per_rank"]]
        print(f"{name}: each host's link sent per step {min(tx):.0f}..{max(tx):.0f} B; the "
              f"ranks counted {min(own):.0f}..{max(own):.0f} B")
        # the link carries what the ranks sent, plus TCP/IP headers and acknowledgements,
        # within 5% (the links' counters and the ranks' steps are not read at one instant)
        check(min(tx) >= 0.95 * min(own) and max(tx) <= 1.05 * max(own) * (1 + 66 / 1448)
              + 64 * 1024, f"{name}: links {tx} against the ranks' own {own}")
        # the cost model's bytes per link (compressed: P, Q and the uncompressed
        # tensors, counted from the shapes) against the counters, as above
        model = [l["model_tx_bytes"] for l in r["links"]]
        print(f"{name}: the cost model says {min(model):.0f}..{max(model):.0f} B per link")
        check(all(m and 0.95 * m <= t <= 1.05 * m * (1 + 66 / 1448) + 64 * 1024
                  for m, t in zip(model, tx)), f"{name}: links {tx} against the model's {model}")
    cut = min(l["tx_bytes"] for l in plain["links"]) / max(l["tx_bytes"] for l in psgd["links"])
    print(f"powersgd:2 cut what the links carried {cut:.1f}x (limit: at least 10x)")
    check(cut >= 10, f"powersgd:2 cut link bytes only {cut:.1f}x")
finish("compress_hosts")
