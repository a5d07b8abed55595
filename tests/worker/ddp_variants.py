#!/usr/bin/python3
"""ddp_variants.py BENCH: the DDP variants a course compares (docs/buckets.md,
docs/labs/buckets.md) and frozen layers keep docs/architecture.md's contract 1:
N ranks give the parameters of one process with batch N*B, to 1e-5 relative
(only the summation order differs; the issue asks 1e-4).

On mlp:784-64-32-10 (six tensors: 200704, 256, 8192, 128, 1280 and 40 bytes):
  - one all-reduce per parameter, `--bucket-mb 0`: six buckets;
  - buckets that make three, two and one of them (`--first-bucket-mb 0`, so
    the first closes as the others: `--bucket-mb 0.001`, `0.005`, `1`);
  - one flat bucket, `--bucket-mb 4096 --first-bucket-mb 0`;
each with overlap on and off (per-parameter overlap is `--bucket-mb 0
--overlap`), in ps and ring at world 2, and the three-bucket plan at world 3.
report.json's nbuckets is the plan's count.

Frozen layers (`--freeze`, PyTorch's requires_grad=False under DDP):
  - one step of one process: with fc1 frozen the layers after it take bitwise
    the step they take without (their gradients do not depend on it), fc1
    none;
  - `--freeze fc1` (the first layer) in ps and ring at world 2, and
    `--freeze fc2` (a layer between two that train) in the ring: the
    parameters of one process frozen alike, to 1e-5; the frozen tensors
    bitwise their initial values (a 0-step run's); what travels is the
    layers that train only (report.json's gradient_bytes, and every rank's
    bytes per step within 5% of the cost model's for them); the ranks hold
    the same bits after every step (--verify);
  - an async ps with fc1 frozen writes its apply-order log, and its replay
    in one process gives the run's bits;
  - refusals: a layer the model lacks (exit 2, naming the flag and the
    model's layers), every layer frozen (exit 2).
PyTorch's own requires_grad=False is the reference in tests/worker/ref_compare.py."""
import glob
import os

from gstest import (SMALL, check, finish, load_params, max_rel, refused, report, run,
                    same_bits, steps_csv, tmpdir)

MODEL = "mlp:784-64-32-10"
B, STEPS = 8, 6
BASE = [a for a in SMALL] + ["--no-shuffle", "--steps", str(STEPS), "--lr", "0.05",
                             "--momentum", "0.9", "--weight-decay", "0.001", "--seed", "3",
                             "--warmup", "0"]
BASE[BASE.index("--model") + 1] = MODEL
# (flags, buckets of MODEL): per parameter, three, two and one, and one flat bucket
PLANS = [(["--bucket-mb", "0"], 6),
         (["--bucket-mb", "0.001", "--first-bucket-mb", "0"], 3),
         (["--bucket-mb", "0.005", "--first-bucket-mb", "0"], 2),
         (["--bucket-mb", "1", "--first-bucket-mb", "0"], 1),
         (["--bucket-mb", "4096", "--first-bucket-mb", "0"], 1)]


def train(flags, what):
    """bench BASE + flags with its parameters saved: (params, results dir), or (None, dir)"""
    d = tmpdir()
    r = run(BASE + flags + ["--save-params", d + "/p", "--out", d])
    if not check(r.returncode == 0, f"{what}: exit {r.returncode}: {r.stderr.strip()[-400:]}"):
        return None, d
    return load_params(d + "/p"), d


def reference(n, extra=()):
    """one process with batch n*B"""
    p, _ = train(["--mode", "local", "--batch", str(n * B)] + list(extra), f"local batch {n * B}")
    return p


refs = {n: reference(n) for n in (2, 3)}

# ---- bucket plans, overlap on and off, both modes
for mode in ("ps", "ring"):
    for flags, nb in PLANS:
        for overlap in ("--overlap", "--no-overlap"):
            for n in ((2, 3) if nb == 3 else (2,)):
                what = f"{mode} world {n} {' '.join(flags)} {overlap}"
                p, d = train(["--mode", mode, "--world", str(n), "--batch", str(B), overlap] +
                             flags, what)
                if p is None or refs[n] is None:
                    continue
                err = max_rel(p, refs[n])
                check(err <= 1e-5, f"{what}: relative error {err:.2e} against one process "
                      f"with batch {n * B} (limit 1e-5)")
                got = report(d)["runs"][0]["nbuckets"]
                check(got == nb, f"{what}: {got} buckets, expected {nb}")

# ---- frozen layers
init, _ = train(["--mode", "local", "--batch", str(2 * B), "--steps", "0"], "initial parameters")
# one step: freezing fc1 leaves the gradients of the layers after it as they are, so they
# take the same step bit for bit, and fc1 none
plain, froz = (train(["--mode", "local", "--batch", str(2 * B), "--steps", "1"] + f,
                     f"one step {' '.join(f)}")[0] for f in ([], ["--freeze", "fc1"]))
if init and plain and froz:
    for k in init:
        if k.startswith("fc1."):
            check(same_bits({k: froz[k]}, {k: init[k]}) and not same_bits({k: plain[k]},
                                                                           {k: init[k]}),
                  f"one step: {k} moved with --freeze fc1, or did not without it")
        else:
            check(same_bits({k: froz[k]}, {k: plain[k]}),
                  f"one step: {k} took another step with fc1 frozen than without")
for layer, modes in (("fc1", ("ps", "ring")), ("fc2", ("ring",))):
    ref = reference(2, ["--freeze", layer])
    if ref is None or init is None:
        continue
    frozen = [k for k in init if k.startswith(layer + ".")]
    check(len(frozen) == 2, f"{layer}: tensors {frozen}")
    for k in frozen:
        check(same_bits({k: ref[k]}, {k: init[k]}), f"local --freeze {layer}: {k} moved")
    for mode in modes:
        what = f"{mode} world 2 --freeze {layer}"
        p, d = train(["--mode", mode, "--world", "2", "--batch", str(B), "--verify",
                      "--freeze", layer], what)
        if p is None:
            continue
        err = max_rel(p, ref)
        check(err <= 1e-5, f"{what}: relative error {err:.2e} against one process with "
              f"--freeze {layer} (limit 1e-5)")
        for k in frozen:
            check(same_bits({k: p[k]}, {k: init[k]}), f"{what}: {k} is not its initial bits")
        for k in set(p) - set(frozen):
            check(not same_bits({k: p[k]}, {k: init[k]}), f"{what}: {k} did not train")
        run0 = report(d)["runs"][0]
        trains = sum(v.size for k, v in init.items() if k not in frozen)
        check(run0["gradient_bytes"] == 4 * trains,
              f"{what}: gradient_bytes {run0['gradient_bytes']}, the layers that train "
              f"hold {4 * trains}")
        for pr in run0["per_rank"]:
            model = pr["model_bytes_sent"] + pr["model_bytes_recv"]
            got = pr["bytes_sent"] + pr["bytes_recv"]
            check(model > 0 and abs(got / model - 1) <= 0.05,
                  f"{what} rank {pr['rank']}: {got:.0f} bytes/step against the cost model's "
                  f"{model:.0f} for the layers that train")
        hashes = {}
        for row in steps_csv(d):
            hashes.setdefault(row["step"], set()).add(row["param_hash"])
        check(len(hashes) == STEPS and all(len(h) == 1 for h in hashes.values()),
              f"{what}: ranks hold different parameters: {hashes}")

# an async ps with a frozen layer: its log replays bitwise
d = tmpdir()
r = run(BASE + ["--mode", "ps", "--world", "2", "--batch", str(B), "--ps-sync", "async",
                "--freeze", "fc1", "--out", d])
logs = glob.glob(os.path.join(d, "runs", "*", "apply_order.txt"))
if check(r.returncode == 0 and len(logs) == 1,
         f"async ps --freeze fc1: exit {r.returncode}, logs {logs}: {r.stderr.strip()[-300:]}"):
    check("freeze fc1" in open(logs[0]).read(), "the apply-order log does not say fc1 is frozen")
    r2 = run(["--mode", "local", "--replay", logs[0], "--quiet", "--out", tmpdir()])
    check(r2.returncode == 0, f"replay of an async --freeze fc1 log: exit {r2.returncode}: "
          f"{r2.stdout.strip()[-300:]} {r2.stderr.strip()[-300:]}")

refused(BASE + ["--mode", "ring", "--world", "2", "--freeze", "fc9"], "--freeze",
        "no layer 'fc9' (its layers: fc1, fc2, fc3)")
refused(BASE + ["--mode", "ring", "--world", "2", "--freeze", "fc1,fc2,fc3"], "--freeze",
        "nothing would train")

finish("ddp_variants")
