#!/usr/bin/python3
"""knobs_time_to_target.py: docs/compression.md's "Step time and time to a
target loss, per knob": every --compress knob of both modes, its step and
the wall-clock time until the smoothed training loss first reaches 0.3, on
real data (scikit-learn's digits), for the mlp 64-1024-1024-10 (8x8 digits)
and lenet (the digits at 32x32), ring and ps at world 2, on loopback and on
2 emulated hosts at 1 Gbit/s and 100 Mbit/s. A step can shorten while the
loss takes longer: a knob is judged by the time to the loss. Each run:

    /usr/bin/python3 tools/digits_idx.py D --seed 0
    /usr/bin/python3 tools/digits_idx.py D32 --seed 0 --size 32
    bench --mode ring|ps [--link none | --hosts 2 --link 1gbit|100mbit] --world 2 \\
          --model mlp:64-1024-1024-10 --data idx:D/train-images.idx,D/train-labels.idx \\
          (or --model lenet --data idx:D32/train-images.idx,D32/train-labels.idx) \\
          --batch 32 --lr 0.05 --seed 1 --steps 150 --warmup 3 --threads 1 --repeat 1 \\
          --target-loss 0.3 --compress none|fp16|topk:0.1|powersgd:2

with OPENBLAS_NUM_THREADS=1, from the repository's root, as root (emulated
hosts). ROUNDS rounds, each running every model, link, mode and knob once
in turn (so that drift falls on all of them alike). The file keeps every
run's lines as bench printed them (its run line, the forecast before and
beside) and report.json's median step, rank 1's bytes sent per step (ring:
a rank's; ps: the worker's pushes), time_to_target_s and last-step loss;
then the table: sent, the forecast's medians (none -> knob, and its word),
the median step and the median time to 0.3, every run beside them ("never"
where a run did not reach 0.3 in its steps). The profiles' step times of
the same section: compress_profiles.py. Writes docs/results/compression/
<date>-knobs-time-to-target.txt, its first lines tools/results_header.py's
(a clean commit, bench built from it, else refused). About 35 minutes on 2
cores at 3 rounds (26 of them the steps of the 2026-11-27 sitting).

    docs/results/compression/knobs_time_to_target.py [--rounds 3] [--bench B] [--out DIR]
        [--results FILE] [--quick] [--allow-dirty]

Needs scikit-learn for /usr/bin/python3 (python3-sklearn). --quick: one
round of mlp:64-64-10 and lenet, 8 steps (2 warm-up), on loopback and 100
Mbit/s, every mode and knob, to try the script; its file goes to the
temporary folder unless --results says."""
import os
import statistics
import subprocess

import compress_lib as lib

SCRIPT = "knobs_time_to_target.py"
NAME = "knobs-time-to-target"
KNOBS = [("ring", "none"), ("ring", "fp16"), ("ring", "topk:0.1"), ("ring", "powersgd:2"),
         ("ps", "none"), ("ps", "fp16"), ("ps", "topk:0.1"), ("ps", "powersgd:2")]
TARGET = "0.3"


def data(out):
    """the digits as IDX files (8x8 for the mlp, 32x32 for lenet), seed 0"""
    dirs = {}
    for key, extra in (("D", []), ("D32", ["--size", "32"])):
        d = os.path.join(out, "digits32" if extra else "digits")
        argv = ["/usr/bin/python3", os.path.join(lib.ROOT, "tools", "digits_idx.py"), d,
                "--seed", "0"] + extra
        try:
            r = subprocess.run(argv, cwd=lib.ROOT, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            lib.fail(SCRIPT, f"tools/digits_idx.py {d} ran past 300 s")
        if r.returncode != 0:
            lib.fail(SCRIPT, f"tools/digits_idx.py {' '.join(argv[2:])} failed, exit {r.returncode} "
                     f"(python3-sklearn installed?):\n{r.stderr[-1500:]}")
        dirs[key] = d
    return dirs


def models(dirs, quick):
    """(the table's name, bench's model, its data)"""
    return [("mlp", "mlp:64-64-10" if quick else "mlp:64-1024-1024-10", dirs["D"]),
            ("lenet", "lenet", dirs["D32"])]


def argv(bench, mode, link, model, d, knob, steps, warmup):
    """one run; LINK: its flags (lib.LINKS), or a word standing for them"""
    return ([bench, "--mode", mode] + lib.LINKS.get(link, ("", [link]))[1] +
            ["--world", "2", "--model", model,
             "--data", f"idx:{d}/train-images.idx,{d}/train-labels.idx", "--batch", "32",
             "--lr", "0.05", "--seed", "1", "--steps", str(steps), "--warmup", str(warmup),
             "--threads", "1", "--repeat", "1", "--target-loss", TARGET, "--compress", knob])


def to_target(rs):
    """the time to the loss: the median with every run beside it, or how many
    runs never reached it (with the median of their last-step losses)"""
    tt = [r.r["time_to_target_s"] for r in rs]
    never = [r.r["final_loss"] for r, t in zip(rs, tt) if t is None]
    got = [t for t in tt if t is not None]
    if not never:
        med = f"{statistics.median(got):.2f} s"
        return med if len(got) == 1 else f"{med} ({', '.join(f'{t:.2f}' for t in sorted(got))})"
    last = [x for x in never if x is not None]  # null: the loss diverged
    s = f"never in {len(never)} of {len(rs)} (last-step loss " + \
        (f"{statistics.median(last):.2f})" if last else "diverged)")
    if got:
        s += "; in the others " + ", ".join(f"{t:.2f} s" for t in sorted(got))
    return s


def main():
    a = lib.parse(__doc__, SCRIPT, NAME, "small models, 8 steps, one round",
                  out_help="bench's reports and the data")
    links, steps, warmup, rounds = ["lo", "1g", "100m"], 150, 3, a.rounds
    if a.quick:
        links, steps, warmup, rounds = ["lo", "100m"], 8, 2, 1
    lib.need_root(SCRIPT, links)
    head = lib.header(SCRIPT, a.bench, a.allow_dirty)
    out = lib.out_dir(a.out, NAME)
    dirs = data(out)
    mods = models(dirs, a.quick)
    cells = [((label, link, mode, knob),
              f"{model}, {lib.LINKS[link][0]}, {mode}, --compress {knob}",
              argv(a.bench, mode, link, model, d, knob, steps, warmup),
              f"{label}-{link}-{mode}-{knob}")
             for label, model, d in mods for link in links for mode, knob in KNOBS]
    runs, every, load0, secs = lib.rounds(SCRIPT, rounds, cells, out, 900)
    lines = head + [
        f"# ring and ps at world 2, batch 32 per rank, lr 0.05, seed 1, {steps} steps ({warmup} "
        f"warm-up), target loss {TARGET}; {rounds} round(s), each every run once in turn; "
        f"OPENBLAS_NUM_THREADS=1; load average {load0[0]:.1f} before, {os.getloadavg()[0]:.1f} "
        f"after ({secs:.0f} s). The data, then each run, from the repository's root "
        "(as root):",
        "#   /usr/bin/python3 tools/digits_idx.py D --seed 0",
        "#   /usr/bin/python3 tools/digits_idx.py D32 --seed 0 --size 32",
        "#   " + " ".join(argv(lib.rel(a.bench), "MODE", "LINK", "MODEL", "DATA", "KNOB", steps,
                               warmup)) + " --out DIR",
        "# LINK: " + "; ".join(f"{v[0]}: {' '.join(v[1])}" for v in (lib.LINKS[k] for k in links)),
        "# MODEL (DATA): " + " | ".join(f"{m} ({'D32' if d == dirs['D32'] else 'D'})"
                                        for _, m, d in mods) +
        "; MODE KNOB: " + " | ".join(f"{m} {k}" for m, k in KNOBS),
        f"# D, D32: {lib.rel(dirs['D'])}, {lib.rel(dirs['D32'])}",
        "", "every run, in order: bench's lines, then report.json's"] + every + [
        "", f"medians of the rounds (sent: rank 1's bytes per step, ring: a rank's, ps: the "
        f"worker's pushes; forecast: the model's step, uncompressed -> with the knob, and its "
        f"word; time to {TARGET}: report.json's time_to_target_s)",
        f"| model | link | mode | `--compress` | sent per step | forecast: none → knob | "
        f"step ms, median ({rounds} runs) | time to {TARGET}, median ({rounds} runs) |",
        "|---|---|---|---|---|---|---|---|"]
    for label, _, _ in mods:
        for link in links:
            for mode, knob in KNOBS:
                rs = runs[(label, link, mode, knob)]
                lines.append(f"| {label} | {lib.LINKS[link][0]} | {mode} | {knob} | "
                             f"{lib.size(statistics.median(r.sent() for r in rs))} | "
                             f"{lib.forecast_cell(rs)} | "
                             f"{lib.cell([r.step_ms() for r in rs], lib.ms)} | {to_target(rs)} |")
    lib.write(SCRIPT, lib.results_path(a.results, head, NAME, a.quick), lines)


if __name__ == "__main__":
    main()
