#!/usr/bin/python3
"""equivalence.py MODE WORLDS: docs/architecture.md's contracts 1 and 2 for a backend.

With --no-shuffle, N ranks of per-rank batch B give the parameters of one
process with batch N*B (to 1e-5 relative: only the summation order
differs); every rank holds bitwise the same parameters after every step
(--verify hashes them into steps.csv); two runs give the same bits; for the
ring, overlap on and off give the same bits; bytes per step are the cost
model's within 5%.

    equivalence.py BENCH ps|ring 1,2,3,4 [extra bench flags...]"""
import sys

from gstest import (SMALL, check, finish, load_params, max_rel, report, run, same_bits,
                    steps_csv, tmpdir)

mode, worlds, extra = sys.argv[2], [int(w) for w in sys.argv[3].split(",")], sys.argv[4:]
B, STEPS = 8, 6
base = SMALL + ["--no-shuffle", "--steps", str(STEPS), "--lr", "0.05", "--momentum", "0.9",
                "--weight-decay", "0.001", "--seed", "3", "--warmup", "0"] + extra

for n in worlds:
    ref_dir, d1, d2 = tmpdir(), tmpdir(), tmpdir()
    r = run(base + ["--mode", "local", "--batch", str(n * B), "--save-params", ref_dir + "/p",
                    "--out", ref_dir])
    if not check(r.returncode == 0, f"local batch {n * B}: {r.stderr}"):
        continue
    ref = load_params(ref_dir + "/p")
    runs = []
    for d in (d1, d2):
        r = run(base + ["--mode", mode, "--world", str(n), "--batch", str(B), "--verify",
                        "--save-params", d + "/p", "--out", d])
        if not check(r.returncode == 0, f"{mode} world {n}: exit {r.returncode}: {r.stderr}"):
            break
        runs.append(load_params(d + "/p"))
    if len(runs) != 2:
        continue
    err = max_rel(runs[0], ref)
    check(err <= 1e-5, f"{mode} world {n} vs one process with batch {n * B}: relative error "
          f"{err:.2e} > 1e-5")
    check(same_bits(runs[0], runs[1]), f"{mode} world {n}: two runs with the same seed differ")

    rows = steps_csv(d1)
    check(len(rows) == n * STEPS, f"{mode} world {n}: {len(rows)} steps.csv rows, expected {n * STEPS}")
    for step in range(STEPS):
        hashes = {row["param_hash"] for row in rows if int(row["step"]) == step}
        check(len(hashes) == 1 and "0000000000000000" not in hashes,
              f"{mode} world {n} step {step}: ranks hold different parameters: {hashes}")

    rep = report(d1)
    run0 = rep["runs"][0]
    check(run0["mode"] == mode and run0["world"] == n, f"report.json run: {run0['mode']} {run0['world']}")
    if n > 1:
        for pr in run0["per_rank"]:
            model = pr["model_bytes_sent"] + pr["model_bytes_recv"]
            got = pr["bytes_sent"] + pr["bytes_recv"]
            check(model > 0 and abs(got / model - 1) <= 0.05,
                  f"{mode} world {n} rank {pr['rank']}: {got:.0f} bytes/step vs cost model "
                  f"{model:.0f} (more than 5% apart)")

    if mode == "ring" and n > 1:
        d3 = tmpdir()
        r = run(base + ["--mode", mode, "--world", str(n), "--batch", str(B), "--no-overlap",
                        "--save-params", d3 + "/p", "--out", d3])
        if check(r.returncode == 0, f"ring world {n} --no-overlap: {r.stderr}"):
            check(same_bits(load_params(d3 + "/p"), runs[0]),
                  f"ring world {n}: overlap on and off give different parameters")
    if mode == "ps" and n > 1:
        d3 = tmpdir()
        r = run(base + ["--mode", mode, "--world", str(n), "--batch", str(B), "--overlap",
                        "--save-params", d3 + "/p", "--out", d3])
        if check(r.returncode == 0, f"ps world {n} --overlap: {r.stderr}"):
            check(same_bits(load_params(d3 + "/p"), runs[0]),
                  f"ps world {n}: overlap on and off give different parameters")

finish(f"equivalence {mode} {worlds}")
