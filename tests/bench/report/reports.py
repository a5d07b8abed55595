#!/usr/bin/python3
"""reports.py: the files a sweep leaves, as a script or a browser reads them.

  report.json: schema_version, config, environment, one run per mode x world
  with the documented keys as numbers; scaling_efficiency against world 1;
  per-rank busy = compute + reduce + update, and busy + wait + idle = step;
  steps.csv: one row per rank per step, every row with the run id that
  report.json's runs carry; a second sweep into the same --out is refused
  and leaves it as it was; the SVGs parse as XML with an <svg>
  root; trace.json loads as Chrome trace events with one process per rank
  and spans that fit in the run; --help documents every flag; bad flags and
  values are exit-2 usage errors naming the flag; a collective flag in a
  training run names --collective; a wrong --model or --data fails before
  any directory is made; --version says what the build is; a list of modes
  runs world 1 once, as the local step (every mode runs that step there),
  which is the baseline of every mode's scaling; the single master's share
  and bytes over a worker's are numbers for ps and null where there is no
  single master.

    reports.py BENCH"""
import json
import os
import xml.etree.ElementTree as ET

from gstest import SMALL, check, finish, report, run, steps_csv, tmpdir

d = tmpdir()
STEPS = 8
r = run(SMALL + ["--mode", "ps,ring", "--world", "1,2", "--batch", "8", "--steps", str(STEPS),
                 "--warmup", "2", "--out", d])
check(r.returncode == 0, f"sweep: {r.stderr}")
check("ps vs ring" in r.stdout, "no side-by-side comparison printed")

rep = report(d)
check(rep.get("schema_version") == 2, "schema_version")

# one run id: in every steps.csv row and every run of report.json
ids = {row["run_id"] for row in steps_csv(d)}
check(len(ids) == 1 and len(next(iter(ids))) == 16, f"steps.csv run ids: {ids}")
check({x.get("run_id") for x in rep.get("runs", [])} == ids,
      f"report.json run ids {[x.get('run_id') for x in rep.get('runs', [])]} vs steps.csv {ids}")
# a reused --out is refused, and the earlier run is left as it was
before = open(os.path.join(d, "steps.csv")).read()
again = run(SMALL + ["--mode", "ps", "--world", "1", "--steps", "2", "--out", d])
check(again.returncode == 2 and "already holds a run" in again.stderr,
      f"a reused --out: exit {again.returncode}, {again.stderr!r}")
check(open(os.path.join(d, "steps.csv")).read() == before, "a reused --out changed steps.csv")
for k in ("config", "environment", "runs"):
    check(k in rep, f"report.json lacks {k}")
# ranks outnumber the online cores or not: worlds 1 and 2 here
over = 2 > os.sysconf("SC_NPROCESSORS_ONLN")
check(rep.get("oversubscribed") is over and (rep.get("oversubscribed_notice") is None) != over,
      f"report.json oversubscribed {rep.get('oversubscribed')!r}, notice "
      f"{rep.get('oversubscribed_notice')!r}, with 2 ranks on {os.cpu_count()} cores")
check(("NOTE:" in r.stdout) == over, "the oversubscription notice printed or not as it should")
check(rep.get("peers") == [], f"report.json peers without --peer: {rep.get('peers')!r}")
env = rep.get("environment", {})
for k in ("cpu", "cores", "hostname", "git_revision", "libraries", "version", "build_type", "gpu",
          "isa"):
    check(k in env, f"environment lacks {k}")
check(isinstance(rep.get("command_line"), str) and "--mode" in rep["command_line"],
      f"command_line {rep.get('command_line')!r}")
check(isinstance(rep.get("started"), str) and rep["started"].endswith("Z"), f"started {rep.get('started')!r}")
check(rep.get("overlap", rep["config"].get("overlap")) in ("mode default", "on", "off"),
      f"config overlap {rep['config'].get('overlap')!r} is not one of its strings")
runs = rep.get("runs", [])
check(sorted((x["mode"], x["world"]) for x in runs) == [("local", 1), ("ps", 2), ("ring", 2)],
      f"runs: {[(x['mode'], x['world']) for x in runs]}")
NUM = ("throughput_samples_per_s", "step_time_s_median", "step_time_s_p95", "imbalance")
for x in runs:  # one master: ps at world 2 (rank 0 moves (N-1) S = S, as a worker)
    master = x["mode"] == "ps"
    share, vs = x.get("master_traffic_share"), x.get("master_bytes_vs_worker")
    check((isinstance(share, float) and 0.45 < share < 0.55 and isinstance(vs, float) and
           0.95 < vs < 1.05) if master else (share is None and vs is None),
          f"{x['mode']} w{x['world']}: master share {share!r}, bytes over a worker's {vs!r}")
ROW = ("rank", "bytes_sent", "bytes_recv", "compute_s", "comm_wait_s", "reduce_s", "update_s",
       "busy_s", "peak_rss_bytes")
for x in runs:
    for k in NUM:
        check(isinstance(x.get(k), (int, float)) and not isinstance(x.get(k), bool),
              f"{x['mode']} w{x['world']}: {k} is not a number: {x.get(k)!r}")
    se = x.get("scaling_efficiency")
    check(isinstance(se, float) and se > 0, f"{x['mode']} w{x['world']}: scaling_efficiency {se!r}")
    if x["world"] == 1:
        check(abs(se - 1) < 1e-9, f"{x['mode']} w1: scaling efficiency {se} != 1")
    check(len(x["per_rank"]) == x["world"], "per_rank rows")
    for row in x["per_rank"]:
        for k in ROW:
            check(isinstance(row.get(k), (int, float)), f"per_rank {k} not a number")
        busy = row["compute_s"] + row["reduce_s"] + row["update_s"]
        check(abs(busy - row["busy_s"]) <= 1e-9 + 1e-6 * busy, "busy != compute + reduce + update")
        total = row["busy_s"] + row["comm_wait_s"] + row["idle_s"]
        check(total >= row["step_s"] * 0.999, f"busy + wait + idle {total} < step {row['step_s']}")
    check(x["step_time_s_p95"] >= x["step_time_s_median"] > 0, "p95 < median")
    check(x["measured_steps"] == STEPS - 2, f"measured steps {x['measured_steps']}")
    mean = sum(x["step_time_s"][2:]) / (STEPS - 2)
    check(abs(x["throughput_samples_per_s"] - x["global_batch"] / mean) <= 1e-6 * x["throughput_samples_per_s"],
          "throughput != global batch / mean step time")

rows = steps_csv(d)
check(len(rows) == STEPS * (1 + 2 + 2), f"steps.csv has {len(rows)} rows")

CHARTS = ("scaling.svg", "efficiency.svg", "breakdown.svg", "bytes.svg", "memory.svg")
for name in CHARTS:
    try:
        root = ET.parse(os.path.join(d, name)).getroot()
        check(root.tag.endswith("svg"), f"{name}: root is {root.tag}")
        check(len(list(root.iter())) > 20, f"{name}: nearly empty")
    except (ET.ParseError, OSError) as e:
        check(False, f"{name}: {e}")

with open(os.path.join(d, "trace.json")) as f:
    tr = json.load(f)
ev = tr["traceEvents"]
procs = {e["pid"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
check(len(procs) == 1 + 2 + 2, f"trace: {len(procs)} processes, expected one per rank per run")
spans = [e for e in ev if e.get("ph") == "X"]
check(len(spans) > 0 and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans), "trace: bad spans")
names = {e["name"] for e in spans}
for need in ("forward", "backward"):
    check(need in names, f"trace: no {need} spans ({sorted(names)})")

# --help and usage errors
h = run(["--help"])
check(h.returncode == 0, "--help exit")
flags = [w.split()[0] for w in h.stdout.split("--")[1:]]
for f in ("mode", "world", "model", "batch", "bucket-mb", "strong", "steps", "precision",
          "loss-scale", "overlap", "ps-dedicated", "timeout", "device", "out", "collective",
          "quiet", "json", "peer"):
    check(f"--{f}" in h.stdout, f"--help lacks --{f}")
for args, name in ((["--mode", "dp"], "--mode"), (["--world", "0"], "--world"),
                   (["--world", "2,x"], "--world"), (["--bucket-mb", "-1"], "--bucket-mb"),
                   (["--bucket-mb", "4097"], "--bucket-mb"),
                   (["--timeout", "-1"], "--timeout"), (["--collective", "bcast"], "--collective"),
                   (["--peer", "tf"], "--peer"),
                   (["-b", "1Q"], "-b"), (["-f", "1"], "-f"), (["-n", "0"], "-n"),
                   (["-c", "2"], "-c"), (["--mode", "local", "--world", "2"], "--mode local"),
                   (["--save-params", "x", "--world", "1,2"], "--save-params"),
                   (["--out"], "--out"), (["--quiet=1"], "--quiet")):
    r = run(args)
    check(r.returncode == 2 and name in r.stderr, f"{args}: exit {r.returncode}, {r.stderr.strip()}")

# a collective flag in a training run names --collective
for args in (["-n", "5"], ["--json"], ["-b", "1M", "--mode", "ring"]):
    r = run(args)
    check(r.returncode == 2 and "--collective" in r.stderr,
          f"{args} without --collective: exit {r.returncode}, {r.stderr.strip()}")
# a wrong model or data is found before anything starts: no results directory
for args, what in ((["--model", "nosuch"], "nosuch"), (["--data", "idx:/nonexistent,/no"],
                                                      "/nonexistent")):
    nd = os.path.join(tmpdir(), "never")
    r = run(args + ["--out", nd])
    check(r.returncode == 2 and what in r.stderr and not os.path.exists(nd),
          f"{args}: exit {r.returncode}, made {nd}: {os.path.exists(nd)}, {r.stderr.strip()}")
# several modes at world 1: the local step once, which every mode runs there
ld = tmpdir()
r = run(SMALL + ["--mode", "local,ps", "--world", "1", "--batch", "8", "--steps", "3",
                 "--warmup", "1", "--out", ld])
check(r.returncode == 0 and sorted(x["mode"] for x in report(ld).get("runs", [])) == ["local"],
      f"--mode local,ps: exit {r.returncode}, {r.stderr.strip()}")
# the local mode alone runs in bench's own process: it must get its one
# configuration of the sweep, as a launched rank does
r = run(SMALL + ["--mode", "local", "--batch", "8", "--steps", "3", "--warmup", "1", "--out",
                 tmpdir()])
check(r.returncode == 0, f"--mode local: exit {r.returncode}, {r.stderr.strip()}")
# a results directory with a long path: the launcher hands it to the ranks
# whole (their steps.csv rows land in it)
deep = os.path.join(tmpdir(), *(["d" * 60] * 4))
r = run(SMALL + ["--mode", "ps", "--world", "2", "--batch", "8", "--steps", "3", "--warmup", "1",
                 "--out", deep])
check(r.returncode == 0 and len(steps_csv(deep)) == 2 * 3 if r.returncode == 0 else False,
      f"--out with a {len(deep)}-byte path: exit {r.returncode}, {r.stderr.strip()[-400:]}")
v = run(["--version"])
check(v.returncode == 0 and "gradsync" in v.stdout and "git" in v.stdout and "ZeroMQ" in v.stdout
      and "CPU code path" in v.stdout, f"--version: {v.stdout!r}")

finish("reports")
