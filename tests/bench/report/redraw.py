#!/usr/bin/python3
"""redraw.py: `bench --report DIR` and the one summary behind every report.

  - a sweep's report.json read back draws the same tables the sweep
    printed and byte-identical SVG charts (JSON -> summary -> JSON/tables/
    charts loses nothing);
  - a report.json with a metric renamed, missing, or of another type is an
    error (exit 1) naming the metric, and no chart is redrawn from it: a
    missing value is never a zero in a chart;
  - a report of another schema version is refused;
  - a timeline.json with a name bench does not write draws no timeline.

    redraw.py BENCH"""
import json
import os
import re
import shutil

from gstest import SMALL, check, finish, run, tmpdir

CHARTS = ("scaling.svg", "efficiency.svg", "breakdown.svg", "bytes.svg", "memory.svg")

d = tmpdir()
r = run(SMALL + ["--mode", "ps,ring", "--world", "1,2", "--ps-dedicated", "--batch", "8",
                 "--steps", "6", "--warmup", "1", "--out", d])
check(r.returncode == 0, f"sweep: {r.stderr}")


def tables(text):
    """the run tables and the comparison, without progress and file lines"""
    return [l for l in text.splitlines()
            if l.strip() and not re.match(r"(step |results:|gradsync |bench:)", l)]


charts = {n: open(os.path.join(d, n), "rb").read() for n in CHARTS}
again = run(["--report", d])
check(again.returncode == 0, f"--report: exit {again.returncode}: {again.stderr}")
check(tables(again.stdout) == tables(r.stdout) and len(tables(r.stdout)) > 20,
      f"--report tables differ from the sweep's:\n{again.stdout}\n---\n{r.stdout}")
for n in CHARTS:
    check(open(os.path.join(d, n), "rb").read() == charts[n], f"--report redrew {n} differently")

with open(os.path.join(d, "report.json")) as f:
    rep = json.load(f)
ded = next(i for i, x in enumerate(rep["runs"]) if x["server"] is not None)


def broken(change, name):
    """a copy of the results with report.json changed; --report must name `name`"""
    c = tmpdir()
    shutil.copytree(d, c, dirs_exist_ok=True)
    bad = json.loads(json.dumps(rep))
    change(bad)
    with open(os.path.join(c, "report.json"), "w") as f:
        json.dump(bad, f)
    for n in CHARTS:
        os.remove(os.path.join(c, n))
    r = run(["--report", c])
    check(r.returncode == 1 and name in r.stderr,
          f"{name}: --report exit {r.returncode}, stderr {r.stderr.strip()!r}")
    check(not any(os.path.exists(os.path.join(c, n)) for n in CHARTS),
          f"{name}: charts drawn from a report that lacks it")


def rename(obj, old, new):
    obj[new] = obj.pop(old)


broken(lambda b: rename(b["runs"][1], "imbalance", "load_imbalance"), "imbalance")
broken(lambda b: b["runs"][0].pop("throughput_samples_per_s"), "throughput_samples_per_s")
broken(lambda b: rename(b["runs"][1]["per_rank"][1], "busy_s", "busy"), "per_rank[1].busy_s")
broken(lambda b: b["runs"][ded]["server"].pop("reduce_s"), "server.reduce_s")
broken(lambda b: b["runs"][0]["cost_model"].pop("S_bytes"), "cost_model.S_bytes")
broken(lambda b: b["runs"][1].update(step_time_s_median="0.5"), "step_time_s_median")
broken(lambda b: b["runs"][1].update(master_traffic_share="half"), "master_traffic_share")
broken(lambda b: b["runs"][1]["per_rank"][0].pop("peak_rss_bytes"), "peak_rss_bytes")
broken(lambda b: b.update(schema_version=1), "schema_version")

# a timeline's names come back from runs/<id>/timeline.json: only the ones
# bench writes reach the SVG (a tampered file draws no timeline)
c = tmpdir()
shutil.copytree(d, c, dirs_exist_ok=True)
rid = rep["runs"][1]["id"]
tl_path = os.path.join(c, "runs", rid, "timeline.json")
with open(tl_path) as f:
    tl = json.load(f)
tl["mode"] = "<b>ps</b>"
with open(tl_path, "w") as f:
    json.dump(tl, f)
svg = os.path.join(c, f"timeline-{rid}.svg")
os.remove(svg)
r = run(["--report", c])
check(r.returncode == 0 and not (os.path.exists(svg) and "<b>" in open(svg).read()),
      f"a tampered timeline.json: exit {r.returncode}, markup in timeline-{rid}.svg")
check(os.path.exists(os.path.join(c, f"timeline-{rep['runs'][0]['id']}.svg")),
      "--report draws the untouched runs' timelines")

finish("redraw")
