#!/usr/bin/python3
"""compress_bench.py BENCH: --compress end to end on the real bench, loopback.

  - --compress none leaves the parameters bitwise as a run without the flag,
    and so does powersgd before its start step (plain all-reduce before
    start_powerSGD_iter); from the start step on the parameters differ;
  - with powersgd every rank still holds the same bits after every step
    (--verify's hashes), in the ring at world 2 and 3 and at world 1;
  - in ps the server sums the parts and rebuilds the bucket: the ring's
    parameters bitwise at world 2, within 1e-6 at world 3; before the start
    step the plain ps's bits;
  - bytes on the wire per compressed step (the ring's own counters) are at
    least 10x below the plain run's for an MLP of large matrices (in ps: the
    pushes, the parameters still coming back whole), and fp16 halves them, in
    ring and ps;
  - error feedback makes it converge: after a fixed budget of 150 steps the
    loss over (the first 4096 samples of) the synthetic training set with
    powersgd:2 is within 5% of the uncompressed run's;
  - report.json names the compression (per run too), and bench --compare of
    one run per knob labels each row with it; bad combinations are refused
    with a message naming the flag."""
import json
import os

import numpy as np

from gstest import (check, finish, load_params, ranks_agree, report, run, same_bits, steps_csv,
                    tmpdir)

tmp = tmpdir()
BASE = ["--synthetic-samples", "2048", "--threads", "1", "--timeout", "20", "--quiet",
        "--link", "none", "--repeat", "1", "--no-shuffle", "--lr", "0.05", "--seed", "3",
        "--warmup", "0", "--batch", "16"]
n = 0


def train(model, world, mode, extra, steps=6):
    """parameters, steps.csv rows, report.json of one run"""
    global n
    n += 1
    d = os.path.join(tmp, f"r{n}")
    r = run(BASE + ["--model", model, "--mode", mode, "--world", str(world), "--steps",
                    str(steps), "--verify", "--out", d, "--save-params", d + "/p"] + extra)
    if not check(r.returncode == 0, f"{mode} {world} {extra}: exit {r.returncode}: {r.stderr}"):
        return None, [], {}
    return load_params(d + "/p"), steps_csv(d), report(d)


def bytes_per_step(rows, first, rank="0", what="bytes_sent"):
    """a rank's bytes sent (or received) per step from step `first` on"""
    b = [int(r[what]) for r in rows if r["rank"] == rank and int(r["step"]) >= first]
    return sum(b) / len(b) if b else 0.0


MLP = "mlp:784-64-32-10"
plain, rows, rep = train(MLP, 2, "ring", [])
none, _, rep_none = train(MLP, 2, "ring", ["--compress", "none"])
check(same_bits(plain, none), "--compress none changed the parameters")
check(rep_none.get("config", {}).get("compress") == "none",
      f"report.json config.compress: {rep_none.get('config', {}).get('compress')}")
late, _, _ = train(MLP, 2, "ring", ["--compress", "powersgd:2", "--powersgd-start", "1000"])
check(same_bits(plain, late), "powersgd before its start step is not the plain all-reduce")
for start in (0, 2):
    early, erows, rep_p = train(MLP, 2, "ring", ["--compress", "powersgd:2", "--powersgd-start",
                                                 str(start)])
    check(early is not None and not same_bits(plain, early),
          f"powersgd from step {start} left the parameters as plain")
    check(ranks_agree(erows), f"powersgd from step {start}: ranks disagree on the parameters")
    if early:
        moved = max(float(np.max(np.abs(early[k] - plain[k]))) for k in plain)
        print(f"powersgd:2 from step {start}: largest difference from plain {moved:.3g}")
check(rep_p.get("config", {}).get("compress") == "powersgd:2" and
      rep_p["config"].get("powersgd_start") == 2, f"report.json config: {rep_p.get('config')}")
# world 3 (not a power of two) and world 1 (the local backend)
p3, rows3, _ = train(MLP, 3, "ring", ["--compress", "powersgd:1", "--powersgd-start", "0"])
check(p3 is not None and ranks_agree(rows3), "world 3: ranks disagree")
p1, _, _ = train(MLP, 1, "local", ["--compress", "powersgd:2", "--powersgd-start", "0"])
plain1, _, _ = train(MLP, 1, "local", [])
check(p1 is not None and not same_bits(p1, plain1), "world 1 did not compress")

# ps: the server sums the parts and rebuilds the bucket (ps/powersgd_recv.c),
# the arithmetic of the ring's ranks: the same bits at world 2 (a sum of two
# is the same in either order), the same up to summation order at world 3
ps_plain, _, _ = train(MLP, 2, "ps", [])
ps_late, _, _ = train(MLP, 2, "ps", ["--compress", "powersgd:2", "--powersgd-start", "1000"])
check(same_bits(ps_plain, ps_late), "ps: powersgd before its start step is not the plain ps")
for w in (2, 3):
    psgd = ["--compress", "powersgd:2", "--powersgd-start", "2"]
    ring_p, _, _ = train(MLP, w, "ring", psgd)
    ps_p, ps_rows, _ = train(MLP, w, "ps", psgd)
    if not check(ring_p is not None and ps_p is not None, f"ps / ring powersgd at world {w}"):
        continue
    check(ranks_agree(ps_rows), f"ps powersgd world {w}: ranks disagree on the parameters")
    worst = max(float(np.linalg.norm(ps_p[k].astype(np.float64) - ring_p[k]) /
                      np.linalg.norm(ring_p[k])) for k in ring_p)
    print(f"ps powersgd:2 against the ring's at world {w}: bitwise {same_bits(ps_p, ring_p)}, "
          f"largest relative difference {worst:.2e}")
    if w == 2:
        check(same_bits(ps_p, ring_p), "ps and ring powersgd differ at world 2")
        check(not same_bits(ps_p, ps_plain), "ps powersgd left the parameters as the plain ps")
    else:
        check(worst <= 1e-6, f"ps and ring powersgd at world 3 differ by {worst:.2e} (> 1e-6)")

# bytes: two 512 x 512 layers at rank 2 send about 1/64 of their floats
BIG = "mlp:784-512-512-10"
_, prow, _ = train(BIG, 2, "ring", [], steps=5)
_, crow, _ = train(BIG, 2, "ring", ["--compress", "powersgd:2", "--powersgd-start", "2"], steps=5)
_, hrow, _ = train(BIG, 2, "ring", ["--compress", "fp16"], steps=5)
bp, bc, bh = bytes_per_step(prow, 2), bytes_per_step(crow, 2), bytes_per_step(hrow, 2)
bc_before = bytes_per_step([r for r in crow if int(r["step"]) < 2], 0)
print(f"{BIG}, ring world 2, rank 0 sent per step: plain {bp:.0f} B, fp16 {bh:.0f} B "
      f"({bp / max(bh, 1):.2f}x less), powersgd:2 {bc:.0f} B ({bp / max(bc, 1):.1f}x less; "
      f"{bc_before:.0f} B before its start step)")
check(bc > 0 and bp / bc >= 10, f"powersgd:2 cut bytes only {bp / max(bc, 1):.1f}x")
check(abs(bc_before - bp) <= 0.01 * bp, "before the start step the bytes are not plain")
check(1.9 <= bp / max(bh, 1) <= 2.1, f"fp16 cut bytes {bp / max(bh, 1):.2f}x, not 2x")
# ps: a worker's pushes shrink as the ring's traffic does; the parameters
# still come back whole (and the parts' sums before them)
_, pps, _ = train(BIG, 2, "ps", [], steps=5)
_, cps, _ = train(BIG, 2, "ps", ["--compress", "powersgd:2", "--powersgd-start", "2"], steps=5)
up_p, up_c = bytes_per_step(pps, 2, "1"), bytes_per_step(cps, 2, "1")
down_p, down_c = (bytes_per_step(pps, 2, "1", "bytes_recv"),
                  bytes_per_step(cps, 2, "1", "bytes_recv"))
print(f"{BIG}, ps world 2, rank 1 per step: pushed {up_p:.0f} B plain, {up_c:.0f} B with "
      f"powersgd:2 ({up_p / max(up_c, 1):.1f}x less); pulled {down_p:.0f} B and {down_c:.0f} B")
check(up_c > 0 and up_p / up_c >= 10, f"ps powersgd:2 cut the pushes only {up_p / max(up_c, 1):.1f}x")
check(down_p <= down_c <= down_p + 2 * up_c, f"ps powersgd:2 pulled {down_c:.0f} B, not the "
      f"parameters ({down_p:.0f} B) and the sums of its parts")
_, psf, _ = train(MLP, 2, "ps", [], steps=3)
_, psh, _ = train(MLP, 2, "ps", ["--compress", "bf16"], steps=3)
r_ps = bytes_per_step(psf, 0) / max(bytes_per_step(psh, 0), 1)
print(f"ps world 2, bf16 against fp32 traffic: {r_ps:.2f}x fewer bytes")
check(1.9 <= r_ps <= 2.1, f"ps: bf16 cut bytes {r_ps:.2f}x, not 2x")

# convergence: the same budget of steps, the loss at its end (--eval)
def eval_loss(extra):
    global n
    n += 1
    d = os.path.join(tmp, f"e{n}")
    r = run(BASE[:-2] + ["--batch", "32", "--model", "mlp:784-256-10", "--mode", "ring",
                         "--world", "2", "--steps", "150", "--lr", "0.02", "--eval",
                         "--synthetic-samples", "4096", "--out", d] + extra)
    if not check(r.returncode == 0, f"{extra}: exit {r.returncode}: {r.stderr}"):
        return float("nan")
    return report(d)["runs"][0]["eval_loss"]


l_plain, l_psgd = eval_loss([]), eval_loss(["--compress", "powersgd:2"])
print(f"loss after 150 steps: plain {l_plain:.5f}, powersgd:2 {l_psgd:.5f} "
      f"({100 * (l_psgd / l_plain - 1):+.1f}%)")
check(l_psgd <= 1.05 * l_plain and l_plain < 0.5,
      f"powersgd:2 did not converge with the plain run: {l_psgd} vs {l_plain}")

# one run per --compress side by side (bench --compare): each labelled with
# its knob, with its time to the target loss; compare.json names the knob
knob_dirs = []
for c in ("none", "powersgd:2"):
    d = os.path.join(tmp, "knob-" + c.replace(":", "_"))
    r = run(BASE + ["--model", MLP, "--mode", "ring", "--world", "2", "--steps", "20",
                    "--compress", c, "--target-loss", "2.5", "--out", d])
    check(r.returncode == 0, f"knob run {c}: exit {r.returncode}: {r.stderr[-300:]}")
    knob_dirs.append(d)
cmp_dir = os.path.join(tmp, "knob-compare")
r = run(["--compare", ",".join(knob_dirs), "--target-loss", "2.5", "--out", cmp_dir])
rows = [ln for ln in r.stdout.splitlines() if ln.startswith("  ring")]
print("\n".join(rows))
check(r.returncode == 0 and len(rows) == 2 and rows[1].startswith("  ring powersgd:2") and
      not rows[0].startswith("  ring powersgd"), f"--compare of two knobs: {r.stdout[-600:]}")
try:
    with open(os.path.join(cmp_dir, "compare.json")) as f:
        cmp = json.load(f)
    check([x["compress"] for x in cmp["runs"]] == ["none", "powersgd:2"] and
          all(x["time_to_target_s"] is not None for x in cmp["runs"]),
          f"compare.json: {[(x.get('compress'), x.get('time_to_target_s')) for x in cmp['runs']]}")
except (OSError, ValueError, KeyError) as ex:
    check(False, f"compare.json: {ex}")

# refusals
for args, words in (
        (["--mode", "ps", "--world", "2", "--compress", "powersgd:2", "--ps-servers", "2"],
         "sharded ps"),
        (["--mode", "ps", "--world", "2", "--compress", "powersgd:2", "--ps-sync", "ssp:1"],
         "--ps-sync bsp"),
        (["--mode", "ps", "--world", "2", "--compress", "powersgd:2", "--loss-scale", "8"],
         "--loss-scale"),
        (["--mode", "local", "--world", "1", "--compress", "topk:0.1"], "--mode local"),
        (["--mode", "ring", "--world", "2", "--compress", "powersgd:0"], "--compress"),
        (["--mode", "ring", "--world", "2", "--compress", "powersgd:2", "--precision", "fp16"],
         "--precision fp32"),
        (["--mode", "ring", "--world", "2", "--compress", "powersgd:2", "--powersgd-start",
          "-1"], "powersgd-start")):
    r = run(BASE + ["--model", MLP, "--steps", "2", "--out", os.path.join(tmp, "bad")] + args)
    check(r.returncode != 0 and words in r.stderr and "Traceback" not in r.stderr,
          f"{args}: exit {r.returncode}, stderr {r.stderr.strip()[:300]}")

finish("compress_bench")
