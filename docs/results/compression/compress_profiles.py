#!/usr/bin/python3
"""compress_profiles.py: docs/compression.md's ResNet-50 and BERT-base rows:
the step of the ring at world 2 with each --compress knob, on loopback and
on 2 emulated hosts at 1 Gbit/s, against the cost model's forecast printed
before each run, for the two profiles at 50 ms of emulated compute per step
(their loss trains toward nothing: step time only). Each run, as the
2026-11-27 sitting's (its single runs and its three rounds alike):

    bench --mode ring [--link none | --hosts 2 --link 1gbit] --world 2 --model resnet50|bert-base \\
          --compute-ms 50 --steps 4 --warmup 1 --timeout 120 --threads 1 --repeat 1 \\
          --powersgd-start 0 --compress none|fp16|powersgd:2

with OPENBLAS_NUM_THREADS=1, from the repository's root, as root (emulated
hosts); ROUNDS interleaved rounds, every cell once in each. The file keeps
every run's lines as bench printed them (its run line, the forecast before
and beside) and report.json's median step and rank 1's bytes sent per step,
then the table: sent, the forecast's medians, the median step with every
run beside it, and the speed-up of the median over --compress none's.
Writes docs/results/compression/<date>-compress-profiles.txt, its first
lines tools/results_header.py's (a clean commit, bench built from it, else
refused). About 10 minutes on 2 cores at 3 rounds.

    docs/results/compression/compress_profiles.py [--rounds 3] [--bench B] [--out DIR]
        [--results FILE] [--quick] [--allow-dirty]

--quick: one round of resnet50 alone, 2 steps (1 warm-up), both links and
every knob, to try the script; its file goes to the temporary folder unless
--results says."""
import os
import statistics

import compress_lib as lib

SCRIPT = "compress_profiles.py"
NAME = "compress-profiles"
MODELS = ["resnet50", "bert-base"]
KNOBS = ["none", "fp16", "powersgd:2"]
LINKS = ["lo", "1g"]


def argv(bench, link, model, knob, steps, warmup):
    """one cell's run; LINK: its flags (lib.LINKS), or a word standing for them"""
    return ([bench, "--mode", "ring"] + lib.LINKS.get(link, ("", [link]))[1] +
            ["--world", "2", "--model", model, "--compute-ms", "50", "--steps", str(steps),
             "--warmup", str(warmup), "--timeout", "120", "--threads", "1", "--repeat", "1",
             "--powersgd-start", "0", "--compress", knob])


def mb(b):
    """bytes as the doc's profile rows write them: 102.24 MB, 0.88 MB"""
    return f"{b / 1e6:.2f} MB"


def main():
    a = lib.parse(__doc__, SCRIPT, NAME, "resnet50 alone, 2 steps, one round")
    models, steps, warmup, rounds = MODELS, 4, 1, a.rounds
    if a.quick:
        models, steps, warmup, rounds = ["resnet50"], 2, 1, 1
    lib.need_root(SCRIPT, LINKS)
    head = lib.header(SCRIPT, a.bench, a.allow_dirty)
    out = lib.out_dir(a.out, NAME)
    cells = [((model, link, knob), f"{model}, {lib.LINKS[link][0]}, --compress {knob}",
              argv(a.bench, link, model, knob, steps, warmup), f"{model}-{link}-{knob}")
             for model in models for link in LINKS for knob in KNOBS]
    runs, every, load0, secs = lib.rounds(SCRIPT, rounds, cells, out, 900)
    lines = head + [
        f"# ring at world 2, batch 128 per rank (the default), 50 ms of emulated compute per step, "
        f"{steps} steps ({warmup} warm-up), {rounds} interleaved round(s) of every cell, "
        f"OPENBLAS_NUM_THREADS=1; load average {load0[0]:.1f} before, {os.getloadavg()[0]:.1f} "
        f"after ({secs:.0f} s). Each run, from the repository's root (as root):",
        "#   " + " ".join(argv(lib.rel(a.bench), "LINK", "MODEL", "KNOB", steps, warmup)) +
        " --out DIR",
        "# LINK: " + "; ".join(f"{v[0]}: {' '.join(v[1])}" for v in
                               (lib.LINKS[k] for k in LINKS)),
        "# MODEL: " + " | ".join(models) + "; KNOB: " + " | ".join(KNOBS),
        "", "every run, in order: bench's lines, then report.json's"] + every + [
        "", "medians of the rounds (model | link | knob | sent: rank 1's bytes per step | forecast: "
        "the model's step, uncompressed -> with the knob, and its word | step ms, median (runs) | "
        "speed-up: none's median step / the knob's)",
        "| model | link | `--compress` | sent per step | forecast: none → knob | "
        "step ms, median (runs) | speed-up |",
        "|---|---|---|---|---|---|---|"]
    for model in models:
        for link in LINKS:
            base = statistics.median(r.step_ms() for r in runs[(model, link, "none")])
            for knob in KNOBS:
                rs = runs[(model, link, knob)]
                step = [r.step_ms() for r in rs]
                lines.append(f"| {model} | {lib.LINKS[link][0]} | {knob} | "
                             f"{mb(statistics.median(r.sent() for r in rs))} | "
                             f"{lib.forecast_cell(rs)} | {lib.cell(step, lib.ms)} | "
                             f"{base / statistics.median(step):.2f}x |")
    lib.write(SCRIPT, lib.results_path(a.results, head, NAME, a.quick), lines)


if __name__ == "__main__":
    main()
