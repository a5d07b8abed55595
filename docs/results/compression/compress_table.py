#!/usr/bin/python3
"""compress_table.py: docs/compression.md's "Each knob on three links": what
each --compress knob sends and how long the ring's step takes, against the
cost model's forecast printed before the run, for the mlp 784-1024-1024-10
and lenet on synthetic data, ring at world 2, on loopback and on 2 emulated
hosts at 1 Gbit/s and 100 Mbit/s:

    bench --mode ring --world 2 [--link none | --hosts 2 --link 1gbit|100mbit] \\
          --model mlp:784-1024-1024-10|lenet --batch 64 --steps 10 --warmup 3 \\
          --repeat 1 --threads 1 --compress none|fp16|powersgd:2

with OPENBLAS_NUM_THREADS=1, from the repository's root, as root (emulated
hosts). ROUNDS interleaved rounds (every cell once per round, so that a slow
minute falls on all of them); the 2026-11-26 table was one run per cell
(--rounds 1). The file keeps every run's lines as bench printed them (its
run line, the forecast before the run and beside it after) and report.json's
median step and rank 1's bytes sent per step, then the table: the median of
the rounds with every run beside it. Writes docs/results/compression/<date>-
compress-table.txt, its first lines tools/results_header.py's (a clean
commit, bench built from it, else refused). About 6 minutes on 2 cores at
3 rounds.

    docs/results/compression/compress_table.py [--rounds 3] [--bench B] [--out DIR]
        [--results FILE] [--quick] [--allow-dirty]

--quick: one round of mlp:784-64-10 and lenet, 3 steps (1 warm-up), 1024
synthetic samples, every link and knob (seconds), to try the script; its file goes to the temporary
folder unless --results says."""
import os
import statistics

import compress_lib as lib

SCRIPT = "compress_table.py"
NAME = "compress-table"
MODELS = ["mlp:784-1024-1024-10", "lenet"]
KNOBS = ["none", "fp16", "powersgd:2"]
LINKS = ["lo", "1g", "100m"]


def argv(bench, link, model, knob, steps, warmup, extra=()):
    """one cell's run; LINK: its flags (lib.LINKS), or a word standing for them"""
    return ([bench, "--mode", "ring", "--world", "2"] + lib.LINKS.get(link, ("", [link]))[1] +
            ["--model", model, "--batch", "64", "--steps", str(steps), "--warmup", str(warmup),
             "--repeat", "1", "--threads", "1", "--compress", knob] + list(extra))


def main():
    a = lib.parse(__doc__, SCRIPT, NAME, "small model, 3 steps, one round")
    models, steps, warmup, rounds, extra = MODELS, 10, 3, a.rounds, []
    if a.quick:  # a small dataset too: 60000 synthetic images take lenet seconds to make
        models, steps, warmup, rounds = ["mlp:784-64-10", "lenet"], 3, 1, 1
        extra = ["--synthetic-samples", "1024"]
    lib.need_root(SCRIPT, LINKS)
    head = lib.header(SCRIPT, a.bench, a.allow_dirty)
    out = lib.out_dir(a.out, NAME)
    cells = [((model, link, knob), f"{model}, {lib.LINKS[link][0]}, --compress {knob}",
              argv(a.bench, link, model, knob, steps, warmup, extra), f"{link}-{model}-{knob}")
             for link in LINKS for model in models for knob in KNOBS]
    runs, every, load0, secs = lib.rounds(SCRIPT, rounds, cells, out, 600)
    lines = head + [
        f"# ring at world 2, batch 64 per rank, {steps} steps ({warmup} warm-up), {rounds} interleaved "
        f"round(s) of every cell, OPENBLAS_NUM_THREADS=1; load average {load0[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({secs:.0f} s). Each run, from the repository's "
        "root (as root):",
        "#   " + " ".join(argv(lib.rel(a.bench), "LINK", "MODEL", "KNOB", steps,
                               warmup, extra)) + " --out DIR",
        "# LINK: " + "; ".join(f"{v[0]}: {' '.join(v[1])}" for v in
                               (lib.LINKS[k] for k in LINKS)),
        "# MODEL: " + " | ".join(models) + "; KNOB: " + " | ".join(KNOBS),
        "", "every run, in order: bench's lines, then report.json's"] + every + [
        "", "medians of the rounds (every run beside its median); sent: rank 1's bytes per step; "
        "model step: the forecast's, uncompressed -> with the knob, and its word",
        "| model | link | `--compress` | sent per rank and step | model step: none → knob, forecast | "
        "measured step ms |",
        "|---|---|---|---|---|---|"]
    for model in models:
        for link in LINKS:
            for knob in KNOBS:
                rs = runs[(model, link, knob)]
                lines.append(f"| {model} | {lib.LINKS[link][0]} | {knob} | "
                             f"{lib.size(statistics.median(r.sent() for r in rs))} | {lib.forecast_cell(rs)} | "
                             f"{lib.cell([r.step_ms() for r in rs], lib.ms)} |")
    lib.write(SCRIPT, lib.results_path(a.results, head, NAME, a.quick), lines)


if __name__ == "__main__":
    main()
