#!/usr/bin/python3
"""buckets.py BENCH: --bucket-mb as a sweep axis, end to end on loopback.

  - `--mode ps,ring --bucket-mb 1,100` runs every size in both modes; each
    run's report.json has "bucket_timing" with one entry per bucket of its
    plan: ready marks in readiness order, communication that starts no
    earlier than the bucket was ready (ring, which overlaps) and ends after
    it starts, a hidden share between 0 and the communication's time;
  - a chart per run (buckets-<id>.svg) and one across the sweep
    (bucket-sweep.svg) with the cost model's step beside each measured
    one: on loopback the model takes the transport the sweep measured
    before the runs (report.json environment.loopback_transport, printed),
    and every run has a predicted step; --quiet measures it too;
  - the bucket verdict (stdout and report.json) names, per mode, the size
    whose median step was the lowest, and says why the other lost;
  - --bucket-mb 25 gives bitwise the parameters of a run without the flag,
    in both modes."""
import filecmp
import os
import re

from gstest import check, finish, report, run, tmpdir

tmp = tmpdir()
MODEL = "mlp:784-512-512-512-512-10"
BASE = ["--world", "2", "--link", "none", "--repeat", "1", "--threads", "1", "--timeout", "30",
        "--model", MODEL, "--batch", "16", "--warmup", "2", "--synthetic-samples", "1024"]


def bench(args):
    return run(BASE + args, timeout=200)


d = os.path.join(tmp, "sweep")
r = bench(["--mode", "ps,ring", "--bucket-mb", "1,100", "--steps", "8", "--out", d])
if check(r.returncode == 0, f"sweep: exit {r.returncode}: {r.stderr[-2000:]}"):
    rep = report(d)
    runs = rep["runs"]
    check(sorted((x["mode"], x["bucket_mb"]) for x in runs) ==
          [("ps", 1.0), ("ps", 100.0), ("ring", 1.0), ("ring", 100.0)],
          f"runs {[(x['mode'], x['bucket_mb']) for x in runs]}")
    for x in runs:
        bt = x["bucket_timing"]
        if not check(bt and len(bt["buckets"]) == x["nbuckets"],
                     f"{x['id']}: bucket_timing {bt} for {x['nbuckets']} buckets"):
            continue
        bs = bt["buckets"]
        print(f"{x['id']}: backward {bt['backward_start_s'] * 1e3:.1f}-"
              f"{bt['backward_end_s'] * 1e3:.1f} ms; " + "; ".join(
                  f"b{b['bucket']} ready {b['ready_s'] * 1e3:.1f} comm "
                  f"{b['comm_start_s'] * 1e3:.1f}-{b['comm_end_s'] * 1e3:.1f} hidden "
                  f"{b['hidden_s'] * 1e3:.1f}/{b['comm_s'] * 1e3:.1f}" for b in bs))
        check([b["bucket"] for b in bs] == list(range(len(bs))), f"{x['id']}: bucket numbers")
        ready = [b["ready_s"] for b in bs]
        check(ready == sorted(ready), f"{x['id']}: ready marks out of order {ready}")
        for b in bs:
            check(b["comm_end_s"] >= b["comm_start_s"] >= 0, f"{x['id']}: {b}")
            check(-1e-9 <= b["hidden_s"] <= b["comm_s"] + 1e-9, f"{x['id']}: hidden {b}")
            if x["mode"] == "ring":
                check(b["comm_start_s"] >= b["ready_s"] - 1e-4,
                      f"{x['id']}: bucket {b['bucket']} left before it was ready")
        check(os.path.exists(os.path.join(d, f"buckets-{x['id']}.svg")),
              f"no buckets-{x['id']}.svg")
    check(os.path.exists(os.path.join(d, "bucket-sweep.svg")), "no bucket-sweep.svg")
    lt = rep["environment"]["loopback_transport"]
    if check(lt and lt["alpha_s"] > 0 and lt["bytes_per_s"] > 0, f"loopback transport {lt}"):
        m = re.search(r"cost model on loopback: ZeroMQ over tcp loopback measured now, "
                      r"([0-9.]+) us per message", r.stdout)
        check(m and abs(float(m.group(1)) - lt["alpha_s"] * 1e6) < 0.06,
              f"the printed transport {m and m.group(1)} us is not report.json's {lt}")
    for x in runs:
        p = x["cost_model"]["step_s_predicted"]
        print(f"{x['id']}: step {x['step_time_s_median'] * 1e3:.1f} ms, model "
              f"{p * 1e3 if p else p} ms")
        check(p and p > 0, f"{x['id']}: no predicted step on loopback ({p})")
    with open(os.path.join(d, "bucket-sweep.svg")) as f:
        dashed = f.read().count("stroke-dasharray")
    check(dashed == 2, f"bucket-sweep.svg: {dashed} dashed model lines, not one per mode")
    check(sorted(x["nbuckets"] for x in runs if x["bucket_mb"] == 1.0) ==
          [4, 4] and all(x["nbuckets"] == 2 for x in runs if x["bucket_mb"] == 100.0),
          f"plans {[(x['bucket_mb'], x['nbuckets']) for x in runs]}")
    text = rep["bucket_verdict"]
    print("bucket verdict:", text)
    check(text in r.stdout.replace("\n  ", " ") or text[:60] in r.stdout,
          "the bucket verdict is not printed")
    for mode in ("ps", "ring"):
        mine = [x for x in runs if x["mode"] == mode]
        best = min(mine, key=lambda x: x["step_time_s_median"])
        m = re.search(mode + r" world 2, [^,]+, loopback: best bucket size measured ([0-9.]+) "
                      r"MiB", text)
        if check(m, f"{mode}: no best size in the verdict"):
            check(float(m.group(1)) == best["bucket_mb"],
                  f"{mode}: verdict says {m.group(1)} MiB, the lowest median is "
                  f"{best['bucket_mb']} MiB")
    check(any(w in text for w in ("fixed costs", "ready only when backward ends", "noise",
                                  "too close to call")),
          "the verdict gives no reason")

# --bucket-mb 25 is the default: the same bits
for mode in ("ps", "ring"):
    outs = []
    for tag, extra in (("default", []), ("25", ["--bucket-mb", "25"])):
        o = os.path.join(tmp, f"{mode}-{tag}")
        r = bench(["--mode", mode, "--steps", "4", "--quiet", "--out", o, "--save-params",
                   o + "/p"] + extra)
        if check(r.returncode == 0, f"{mode} {tag}: exit {r.returncode}: {r.stderr[-1000:]}"):
            x = report(o)
            check(x["environment"]["loopback_transport"] and
                  x["runs"][0]["cost_model"]["step_s_predicted"],
                  f"{mode} {tag} --quiet: no loopback model")
        outs.append(o + "/p")
    if all(os.path.isdir(p) for p in outs):
        names = sorted(os.listdir(outs[0]))
        same = names == sorted(os.listdir(outs[1])) and all(
            filecmp.cmp(os.path.join(outs[0], f), os.path.join(outs[1], f), shallow=False)
            for f in names)
        check(same and names, f"{mode}: --bucket-mb 25 changed the parameters ({names})")
finish("buckets")
