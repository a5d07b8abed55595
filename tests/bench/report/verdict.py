#!/usr/bin/python3
"""verdict.py: what a sweep says first and last, on loopback (tests/bench/hosts
checks the default on emulated hosts and without the capabilities).

  - the header says where the ranks talk (--link none: loopback, said so),
    what runs (world 1 once, as the local step), and each model's bucket
    plan, whose buckets and bytes are report.json's nbuckets and
    gradient_bytes;
  - --repeat 2: every configuration once, then again (steps.csv: every
    configuration's first run before any second); each record of
    report.json is the median run of its configuration (for two, the slower)
    with both runs' throughputs and ids, and runs/<id>-r1, -r2 are there;
  - the verdict: the end of the output starts with it (after the per-run
    tables, before the comparison); report.json has it with the figures it
    quotes, which are the records' (ring's throughput over ps's at the
    largest world, its range from the repetitions); report.html opens with
    it; with more ranks than cores on loopback it first says the comparison
    is not meaningful there;
  - the ring's communication partly ran behind backward (hidden > 0), none
    of ps's (it sends after backward);
  - the default flags are the ones the header and --help say.

    verdict.py BENCH"""
import json
import os
import re

from gstest import SMALL, check, finish, report, run, steps_csv, tmpdir

cores = os.sysconf("SC_NPROCESSORS_ONLN")
d = tmpdir()
# the default model, batch and worlds; short, on loopback, twice each
flags = [x for x in SMALL if x not in ("--quiet",)]
flags = flags[:flags.index("--model")] + flags[flags.index("--model") + 2:]
flags = flags[:flags.index("--repeat")] + flags[flags.index("--repeat") + 2:]
r = run(flags + ["--steps", "4", "--warmup", "1", "--repeat", "2", "--out", d], timeout=240)
check(r.returncode == 0, f"sweep: exit {r.returncode}: {r.stderr[-600:]}")
out = r.stdout
rep = report(d)
runs = rep.get("runs", [])

# the header
head = out.split("bench: run")[0]
check("loopback (--link none)" in head, f"the header does not say loopback: {head[:300]}")
check(re.search(r"runs: ps and ring at world 1, 2, 4 \(world 1 once", head),
      f"the header does not say what runs: {head}")
plan = re.findall(r"^  bucket (\d+): ([\d.]+) MiB, (.+)$", head, re.M)
model = runs[0]["model"] if runs else "?"
check(model == "mlp:784-1024-1024-10" and f"model {model}:" in head,
      f"default model {model} in the header")
check(runs and len(plan) == runs[-1]["nbuckets"] and
      abs(sum(float(x[1]) for x in plan) * 2**20 - runs[-1]["gradient_bytes"]) < 0.01 * 2**20,
      f"bucket plan {plan} vs report.json's {runs[-1].get('nbuckets') if runs else None} buckets")
check(plan and "fc2.weight" in plan[0][2] and "fc1.weight" in plan[-1][2],
      f"bucket 0 holds the last layers, the last bucket fc1: {plan}")

# world 1 once, as local; every record two runs, the median of them
check(sorted((x["mode"], x["world"]) for x in runs) ==
      [("local", 1), ("ps", 2), ("ps", 4), ("ring", 2), ("ring", 4)],
      f"runs: {[(x['mode'], x['world']) for x in runs]}")
for x in runs:
    reps = x.get("repeats", {})
    tps = reps.get("throughput_samples_per_s", [])
    check(reps.get("count") == 2 and len(tps) == 2 and x["throughput_samples_per_s"] == min(tps),
          f"{x['id']}: repeats {reps}, throughput {x['throughput_samples_per_s']}")
    check([i[-3:] for i in reps.get("ids", [])] == ["-r1", "-r2"] and x["id"] in reps["ids"],
          f"{x['id']}: repetition ids {reps.get('ids')}")
    for i in reps.get("ids", []):
        check(os.path.exists(os.path.join(d, "runs", i, "run.json")), f"runs/{i}/run.json")
    check(x["scaling_efficiency"] is not None, f"{x['id']}: no scaling against world 1")
# interleaved: every configuration's first run before any second
rows = steps_csv(d)
check("repeat" in rows[0], "steps.csv has no repeat column")
order = []
for row in rows:
    key = (row["mode"], row["world"], row["repeat"])
    if not order or order[-1] != key:
        order.append(key)
firsts = [k for k in order if k[2] == "1"]
check(len(order) == 10 and order[:5] == firsts and all(k[2] == "2" for k in order[5:]),
      f"the runs' order: {order}")

# hidden communication: the ring overlaps, ps does not
for x in runs:
    hidden = sum(p["comm_hidden_s"] for p in x["per_rank"])
    if x["mode"] == "ring":
        check(hidden > 0, f"{x['id']}: no communication behind backward")
    if x["mode"] in ("ps", "local"):
        check(hidden == 0, f"{x['id']}: hidden communication {hidden} without overlap")

# the verdict: where it is printed, and its figures are report.json's
v = rep.get("verdict", {})
text = v.get("text", "")
tail = out[out.rfind("== ps  world") if "== ps  world" in out else 0:]
vi, ci = out.find("== verdict =="), out.find("== ps vs ring")
check(0 < vi < ci and out.rfind("== ring  world") < vi,
      "the verdict is not printed between the per-run tables and the comparison")
printed = " ".join(l.strip() for l in out[vi:ci].splitlines()[1:])
check(printed.strip() == text, f"printed verdict differs from report.json's:\n{printed}\n{text}")
ps4 = next((x for x in runs if x["mode"] == "ps" and x["world"] == 4), None)
ring4 = next((x for x in runs if x["mode"] == "ring" and x["world"] == 4), None)
if check(ps4 and ring4 and v.get("world") == 4, f"verdict world {v.get('world')}"):
    ratio = ring4["throughput_samples_per_s"] / ps4["throughput_samples_per_s"]
    pt, rt = ps4["repeats"]["throughput_samples_per_s"], ring4["repeats"]["throughput_samples_per_s"]
    check(abs(v["ratio"] - ratio) < 1e-9 * ratio, f"verdict ratio {v['ratio']} vs {ratio}")
    check(abs(v["ratio_lo"] - min(rt) / max(pt)) < 1e-9 and
          abs(v["ratio_hi"] - max(rt) / min(pt)) < 1e-9,
          f"verdict range {v['ratio_lo']}-{v['ratio_hi']} vs the repetitions {rt} / {pt}")
    noise = min(rt) <= max(pt) and min(pt) <= max(rt)
    check(v["within_noise"] == noise, f"within noise {v['within_noise']}, ranges {rt} {pt}")
    quoted = f"median ratio {ratio:.2f}x" if noise else f"ring {ratio:.2f}x the throughput of ps"
    check(quoted in text, f"the verdict does not quote {quoted!r}: {text}")
    check(v["ps_bottleneck"] and v["ring_bottleneck"] and
          f"bottleneck: {v['ps_bottleneck']}" in text, f"bottlenecks {v}")
if cores < 4:  # 4 ranks on fewer cores over loopback: said first, before any figure
    check(v.get("meaningful") is False and text.startswith("Not a meaningful comparison") and
          "share" in text.split(".")[0] and "loopback" in text.split(".")[0],
          f"with {cores} cores the verdict starts: {text[:200]}")
    check(re.search(r"\d", text.split(".")[0].replace("world 4", "").replace("4 ranks", "")
                    .replace(f"{cores} core", "")) is None,
          f"a figure before the verdict says the comparison is not meaningful: {text[:200]}")
else:
    check(v.get("meaningful") is True, f"with {cores} cores: {v}")
html = open(os.path.join(d, "report.html")).read()
body = html[html.find("<body>"):]
check(body.find('id="verdict"') < body.find("<figure>") < body.find("<table"),
      "report.html does not open with the verdict, then the chart, then the comparison")

# the defaults are what --help says
h = run(["--help"]).stdout
for flag, default in (("--model", "mlp:784-1024-1024-10"), ("--batch", "128"), ("--steps", "30"),
                      ("--repeat", "3"), ("--link", "auto")):
    check(re.search(rf"{flag} \S+ .*?\[{re.escape(default)}", h, re.S),
          f"--help does not give {flag} the default {default}")
finish("verdict")
