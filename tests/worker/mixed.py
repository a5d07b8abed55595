#!/usr/bin/python3
"""mixed.py: mixed precision through bench, in both modes.

  - fp16 and bf16 training reaches the accuracy of fp32 within 1 point in
    the same number of steps;
  - gradient bytes per step in fp16 are half those of fp32 (within 5%);
  - --loss-scale 1e30 overflows every step: every rank of both modes skips
    every step and the parameters never change (same hash on every rank and
    step, in both modes);
  - a diverging run (huge lr) with dynamic scaling: every rank of both
    modes skips the same steps with the same scales, and the scale halves
    after each skip.

    mixed.py BENCH"""
from gstest import SMALL, check, finish, report, run, steps_csv, tmpdir

BASE = SMALL + ["--world", "2", "--batch", "16"]

acc, traffic = {}, {}
for prec in ("fp32", "fp16", "bf16"):
    d = tmpdir()
    r = run(BASE + ["--mode", "ps,ring", "--steps", "60", "--lr", "0.05", "--precision", prec,
                    "--eval", "--out", d])
    if not check(r.returncode == 0, f"{prec}: {r.stderr}"):
        continue
    for x in report(d)["runs"]:
        acc[(prec, x["mode"])] = x["accuracy"]
        traffic[(prec, x["mode"])] = [p["bytes_sent"] + p["bytes_recv"] for p in x["per_rank"]]
        check(x["precision"] == prec, f"report precision {x['precision']}")
for mode in ("ps", "ring"):
    base = acc.get(("fp32", mode))
    check(base is not None and base >= 0.9, f"{mode} fp32 accuracy {base}")
    for prec in ("fp16", "bf16"):
        a = acc.get((prec, mode))
        check(a is not None and base is not None and abs(a - base) <= 0.01,
              f"{mode} {prec} accuracy {a} vs fp32 {base}")
    t32, t16 = traffic.get(("fp32", mode)), traffic.get(("fp16", mode))
    if check(t32 and t16, f"{mode}: traffic missing"):
        for r32, r16 in zip(t32, t16):
            check(abs(r16 / r32 - 0.5) <= 0.025, f"{mode}: fp16 bytes {r16} vs fp32 {r32}")

# forced overflow: every step skipped everywhere, nothing changes
d = tmpdir()
r = run(BASE + ["--mode", "ps,ring", "--steps", "5", "--precision", "fp16", "--loss-scale", "1e30",
                "--verify", "--out", d])
if check(r.returncode == 0, f"1e30: {r.stderr}"):
    rows = steps_csv(d)
    check(len(rows) == 2 * 2 * 5, f"1e30: {len(rows)} rows")
    check(all(x["skipped"] == "1" for x in rows), "1e30: a step was not skipped")
    check(len({x["param_hash"] for x in rows}) == 1, "1e30: parameters changed or ranks differ")
    check(all(s["skipped_steps"] == 5 for s in report(d)["runs"]), "1e30: skipped_steps in report")

# divergence with dynamic scaling: same skips and scales on every rank and mode
d = tmpdir()
r = run(BASE + ["--mode", "ps,ring", "--steps", "16", "--precision", "fp16", "--lr", "100",
                "--out", d])
if check(r.returncode == 0, f"lr 100: {r.stderr}"):
    seq = {}
    for x in steps_csv(d):
        seq.setdefault((x["mode"], x["rank"]), []).append((int(x["step"]), x["skipped"], float(x["scale"])))
    seqs = [sorted(v) for v in seq.values()]
    check(len(seqs) == 4 and all(s == seqs[0] for s in seqs), "lr 100: ranks or modes disagree on skips")
    s0 = seqs[0]
    check(any(k == "1" for _, k, _ in s0), "lr 100: nothing overflowed")
    check(s0[0][2] == 65536.0, f"dynamic scale starts at {s0[0][2]}")
    for (_, k, sc), (_, _, nxt) in zip(s0, s0[1:]):
        check(nxt == (sc / 2 if k == "1" else sc), f"scale {sc} -> {nxt} after skipped={k}")

finish("mixed")
