"""stale_report.py: what a sweep with a straggler and a stale ps shows
(bench/report/summary_stale.c, charts_stale.c; docs/metrics.md,
docs/stragglers.md), end to end on loopback:

  - samples/s of the ssp run is the window's (throughput_basis "window"),
    recomputed here from steps.csv: samples of the steps inside the window
    where every rank trains over its wall time; the ring's stays samples
    over the sum of step times ("steps");
  - the staleness histogram counts steps.csv's staleness column exactly;
  - who waited for whom adds up to each rank's wait, and the fast ranks of
    the ring waited on the 3x straggler more than on any other rank;
  - the target is 1.10 x the ring's final smoothed loss, taken by both runs,
    the ring reaches it, and the time is on its loss curve;
  - loss.svg (a line per run) and staleness.svg are written and in
    report.html, the comparison prints the time to target, the verdict
    says it, and bench --report prints it again from report.json;
  - --target-loss sets the target; a bad value is refused naming the flag;
  - --compare puts both sweeps' runs on one table with one target and one
    loss chart (compare.json), refuses to overwrite, needs --out, and names
    a directory it cannot read.
Timing: the straggler's extra work is real arithmetic, 3x its compute, so
the attribution holds on a loaded machine; nothing else compares times."""
import json
import os
import re

from gstest import SMALL, check, finish, report, run, steps_csv, tmpdir

ARGS = ["--world", "4", "--steps", "40", "--warmup", "3", "--slow", "3:3",
        "--ps-sync", "ssp:2"] + [a for a in SMALL if a != "--quiet"]

r = run(["--mode", "ps", "--target-loss", "-1"] + SMALL)
check(r.returncode == 2 and "--target-loss" in r.stderr,
      f"--target-loss -1: exit {r.returncode}, {r.stderr.strip()[:200]!r}")

d = tmpdir()
r = run(["--mode", "ps,ring", "--out", d] + ARGS)
check(r.returncode == 0, f"sweep: {r.stderr[-800:]}")
rep = report(d)
runs = {x["mode"]: x for x in rep["runs"] if x["world"] == 4}
ps, ring = runs.get("ps"), runs.get("ring")
check(ps is not None and ring is not None, f"runs {[x['id'] for x in rep['runs']]}")
rows = steps_csv(d)

# samples/s of the stale run, from steps.csv
mine = [x for x in rows if x["mode"] == "ps" and x["world"] == "4"]
steps = max(int(x["step"]) for x in mine) + 1
first = ps["warmup_steps"]
by = {(int(x["rank"]), int(x["step"])): x for x in mine}
t0 = lambda x: float(x["t_start"])
t1 = lambda x: float(x["t_start"]) + float(x["step_s"])
w0 = max(t0(by[(q, first)]) for q in range(4))
w1 = min(t1(by[(q, steps - 1)]) for q in range(4))
applied = 0.0
for x in mine:
    if int(x["step"]) < first or int(x["staleness"]) < 0 or t1(x) <= t0(x):
        continue
    inside = max(0.0, min(t1(x), w1) - max(t0(x), w0))
    applied += int(x["samples"]) * inside / (t1(x) - t0(x))
want = applied / (w1 - w0)
check(ps["throughput_basis"] == "window" and ring["throughput_basis"] == "steps",
      f"bases {ps['throughput_basis']}, {ring['throughput_basis']}")
check(abs(ps["throughput_samples_per_s"] / want - 1) < 1e-3,
      f"ssp samples/s {ps['throughput_samples_per_s']}, from steps.csv {want}")
mean = sum(ring["step_time_s"][ring["warmup_steps"]:]) / ring["measured_steps"]
check(abs(ring["throughput_samples_per_s"] - ring["global_batch"] / mean)
      <= 1e-6 * ring["throughput_samples_per_s"], "ring: samples / sum of step times")

# the histogram against the staleness column
counts = {}
for x in mine:
    s = int(x["staleness"])
    if s >= 0:
        counts[s] = counts.get(s, 0) + 1
hist = ps["staleness_histogram"]
check(hist == [counts.get(k, 0) for k in range(max(counts) + 1)],
      f"histogram {hist}, steps.csv {sorted(counts.items())}")
check(len(hist) <= 3, f"ssp:2 histogram beyond 2: {hist}")

# who waited for whom
for run_ in (ps, ring):
    for q in range(4):
        total = sum(run_["waited_for_s"][q]) + run_["waited_backend_s"][q]
        wait = run_["per_rank"][q]["comm_wait_s"]
        check(abs(total - wait) <= 1e-9 + 1e-6 * wait,
              f"{run_['id']} rank {q}: waits add up to {total}, waited {wait}")
for q in range(3):
    on = ring["waited_for_s"][q]
    check(on[3] > max(on[k] for k in range(4) if k != 3),
          f"ring rank {q} waited on {on}: not mostly on the straggler")

# the target and the time to it
curve = ring["loss_curve"]
check(len(curve["t_s"]) == len(curve["loss"]) > 10, f"ring curve {len(curve['t_s'])} points")
target = 1.10 * curve["loss"][-1]
for x in (ps, ring):
    check(abs(x["target_loss"] - target) <= 1e-9 * target and x["target_from"] == ring["id"],
          f"{x['id']}: target {x['target_loss']} from {x['target_from']!r}, expected {target}")
tt = ring["time_to_target_s"]
first_t = next((t for t, l in zip(curve["t_s"], curve["loss"]) if l <= target), None)
check(tt is not None and tt == first_t, f"ring time to target {tt}, curve says {first_t}")

# the pictures, the tables, the verdict, and the report read back
for name in ("loss.svg", "staleness.svg"):
    check(os.path.exists(os.path.join(d, name)), f"{name} missing")
loss_svg = os.path.join(d, "loss.svg")
svg = open(loss_svg).read() if os.path.exists(loss_svg) else ""
check(len(re.findall(r"<polyline", svg)) == len([x for x in rep["runs"]
                                                   if x["loss_curve"]["t_s"]]),
      "loss.svg: not one line per run")
html = open(os.path.join(d, "report.html")).read()
check("who waited for whom" in html and "Training loss against wall-clock" in html,
      "report.html lacks the waits or loss.svg")
check("== stragglers: time to the target loss ==" in r.stdout and "ps ssp:2" in r.stdout,
      "no stragglers table in the output")
check("Time to the training loss" in rep["verdict"]["text"], f"verdict: {rep['verdict']['text']}")
again = run(["--report", d])
check(again.returncode == 0 and "== stragglers: time to the target loss ==" in again.stdout,
      f"--report: {again.returncode} {again.stderr[-300:]}")

# --target-loss
d2 = tmpdir()
r = run(["--mode", "ps", "--out", d2, "--target-loss", "1e6"] + ARGS)
check(r.returncode == 0, f"--target-loss: {r.stderr[-500:]}")
if r.returncode == 0:
    x = [x for x in report(d2)["runs"] if x["world"] == 4][0]
    check(x["target_loss"] == 1e6 and x["target_from"] == "--target-loss" and
          x["time_to_target_s"] == x["loss_curve"]["t_s"][0],
          f"--target-loss 1e6: {x['target_loss']} {x['target_from']} {x['time_to_target_s']}")

# --compare: both sweeps' runs on one table, one target (the ring's), one chart
d3 = os.path.join(tmpdir(), "cmp")
r = run(["--compare", f"{d},{d2}", "--out", d3])
check(r.returncode == 0, f"--compare: {r.stderr[-500:]}")
if r.returncode == 0:
    cmp = json.load(open(os.path.join(d3, "compare.json")))
    check(len(cmp["runs"]) == 3 and [x["dir"] for x in cmp["runs"]] == [d, d, d2],
          f"compare.json runs {[(x['id'], x['dir']) for x in cmp['runs']]}")
    check(all(abs(x["target_loss"] - target) <= 1e-9 * target and x["target_from"] == ring["id"]
              for x in cmp["runs"]), "compare: not one target from the ring")
    svg = open(os.path.join(d3, "loss.svg")).read()
    check(svg.count("<polyline") == 3, "compare loss.svg: not 3 lines")
    check("== stragglers: time to the target loss ==" in r.stdout and
          "Time to the training loss" in r.stdout, "compare: no table or verdict")
r = run(["--compare", f"{d},{d2}", "--out", d3])
check(r.returncode == 2 and "already holds" in r.stderr, f"compare again: {r.returncode}")
r = run(["--compare", d])
check(r.returncode == 2 and "--out" in r.stderr, f"compare without --out: {r.returncode}")
r = run(["--compare", d + "-none", "--out", os.path.join(tmpdir(), "x")])
check(r.returncode == 1 and d + "-none" in r.stderr, f"compare of nothing: {r.stderr[-200:]}")

finish("stale_report")
