"""lab_defs.py: the six labs of docs/labs/, each as the bench runs it makes
and the table and chart it reads out of their report.json files. A lab is
a function of a run context (tools/lab.py's Lab: the bench command, the
size asked, the output directory) that returns its columns, rows, chart
and notes; LABS lists them in the order a course would use them.

Sizes: "small" is each lab's default (within 5 minutes on a 2-core
machine), "full" the course's full size, "smoke" a seconds-long run that
checks the lab works here (the tests' size: its figures mean nothing)."""
import json
import math
import os
import re
import subprocess

import lab_report as rep

MiB = 1024.0 * 1024.0


def load(d, name="report.json"):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def by_size(c, table):
    return table[c.size]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def ms(s):
    return None if s is None else s * 1e3


# ---- (a) all-reduce time against size and processes (Stanford CS336, assignment 2) ----

def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


GLOO_ROW = re.compile(r"^\s+(\d+)\s+\d+\s+float\s+sum\s+([\d.]+)\s")


def allreduce_sizes(c):
    # smallest, largest, factor, worlds, timed and warm-up iterations
    lo, hi, f, worlds, n, w = by_size(c, {"smoke": (4096, 65536, 4, [2, 3], 2, 1),
                                         "small": (1 << 20, 100 << 20, 10, [2, 4, 6], 5, 2),
                                         "full": (1 << 20, 1000 << 20, 10, [2, 4, 6], 5, 2)})
    notes, avail = [], mem_available()
    gloo = c.have_torch()
    if not gloo:
        notes.append("Gloo: not measured (PyTorch is not installed for /usr/bin/python3; "
                     "Debian: python3-torch)")
    res = {}  # (world, size) -> [gradsync ms, algbw, busbw, gloo ms, gloo busbw]
    for world in worlds:
        top = hi
        # the largest size where the ranks' buffers (about 3.5 x size each for gradsync,
        # 4.5 x for Gloo's) fit in 70% of the memory available now
        while avail and top > lo and world * 4.5 * top > 0.7 * avail:
            top //= f
        if top < hi:
            notes.append(f"{world} processes: sizes above {top / MiB:g} MiB left out "
                         f"(their buffers would not fit the {avail / 2**30:.1f} GiB available)")
        d = c.bench(f"gradsync-w{world}",
                    ["--mode", "ring", "--collective", "allreduce", "--algo", "ring", "-b",
                     str(lo), "-e", str(top), "-f", str(f), "--world", str(world), "-n", str(n),
                     "-w", str(w), "--link", "none"],
                    f"gradsync's ring all-reduce, {world} processes")
        for r in load(d, f"collective-ring-w{world}.json")["rows"]:
            res[(world, r["size_bytes"])] = [r["time_us"] / 1e3, r["algbw_gbps"],
                                             r["busbw_gbps"], None, None]
        if gloo:
            out = c.command(f"gloo-w{world}",
                            [c.python, os.path.join(c.src, "bench", "peers", "gloo_allreduce.py"),
                             "-N", str(world), "-b", str(lo), "-e", str(top), "-f", str(f),
                             "-n", str(n), "-w", str(w)],
                            f"PyTorch's Gloo all-reduce, {world} processes")
            for line in out.splitlines():
                m = GLOO_ROW.match(line)
                size, us = (int(m.group(1)), float(m.group(2))) if m else (0, 0)
                if (world, size) in res and us > 0:  # busbw from the time: its print has 3 decimals
                    res[(world, size)][3:] = [us / 1e3, size / us / 1e3 * 2 * (world - 1) / world]
    order = sorted(res, key=lambda k: (k[1], k[0]))  # by size, then processes
    rows = [[size / MiB, world] + res[(world, size)] for world, size in order]
    cols = ["size (MiB)", "processes", "gradsync time (ms)", "gradsync algbw (GB/s)",
            "gradsync busbw (GB/s)", "Gloo time (ms)", "Gloo busbw (GB/s)"]
    notes += ["time: one all-reduce of float32 (sum), the mean of the timed iterations, the "
              "slowest rank's; gradsync's ring algorithm over TCP on this machine's loopback "
              "(--algo ring), as Gloo's",
              "algbw = size / time; busbw = algbw x 2(n-1)/n (n processes): what each "
              "process's link carries, per second (nccl-tests' definition)"]
    series = []
    for k, world in enumerate(worlds):
        col = rep.COLORS[k]
        series.append({"label": f"gradsync, {world} processes", "color": col,
                       "points": [(r[0], r[2]) for r in rows if r[1] == world]})
        if gloo:
            series.append({"label": f"Gloo, {world} processes", "color": col, "dashed": True,
                           "points": [(r[0], r[5]) for r in rows if r[1] == world]})
    chart = rep.line_chart("All-reduce time against size", "size (MiB)", "time (ms)", series,
                           logx=True, logy=True)
    return cols, rows, chart, notes


# ---- (b) naive, flat, overlapped and bucketed DDP (Stanford CS336, assignment 2) ----

def tail_s(run):
    """seconds from the end of backward to the end of the last bucket's communication"""
    bt = run.get("bucket_timing") or {}
    ends = [b["comm_end_s"] for b in bt.get("buckets", []) if b.get("comm_end_s") is not None]
    if not ends or bt.get("backward_end_s") is None:
        return None
    return max(0.0, max(ends) - bt["backward_end_s"])


def fit_overhead(points):
    """least squares of t = o * n + c / n over (n buckets, t seconds): (o, c), or None"""
    if len({n for n, _ in points}) < 2:
        return None
    s11 = sum(n * n for n, _ in points)
    s12 = float(len(points))
    s22 = sum(1.0 / (n * n) for n, _ in points)
    b1 = sum(n * t for n, t in points)
    b2 = sum(t / n for n, t in points)
    det = s11 * s22 - s12 * s12
    if det <= 0:
        return None
    return (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det


def ddp_variants(c):
    compute, steps, warm, reps = by_size(c, {"smoke": (5, 3, 1, 1), "small": (600, 8, 2, 1),
                                             "full": (600, 20, 4, 3)})
    links = (["--hosts", "2", "--link", "1gbit", "--latency", "1ms"]
             if c.root and c.size != "smoke" else ["--link", "none"])
    common = ["--mode", "ring", "--world", "2", "--model", "resnet50", "--compute-ms",
              str(compute), "--first-bucket-mb", "0", "--steps", str(steps), "--warmup",
              str(warm), "--repeat", str(reps), "--threads", "1", "--timeout", "300"] + links
    a = c.bench("after-backward", common + ["--bucket-mb", "0,4096", "--no-overlap"],
                "naive (a bucket per parameter) and flat (one bucket), after backward")
    b = c.bench("overlapped", common + ["--bucket-mb", "0,1,10,100,1000", "--overlap"],
                "a bucket per parameter and buckets of 1, 10, 100, 1000 MiB, during backward")
    rows, pts, best, best_tail = [], [], None, None
    S = None
    for d, overlap in ((a, False), (b, True)):
        for r in load(d)["runs"]:
            mb, nb = r["bucket_mb"], r["nbuckets"]
            S = r["gradient_bytes"]
            if not overlap:
                name = "naive: one all-reduce per parameter" if mb == 0 else "flat: one bucket"
            else:
                name = ("overlap: one all-reduce per parameter" if mb == 0
                        else f"bucketed: {mb:g} MiB")
            step = r["step_time_s_median"]
            wait = mean([p["comm_wait_s"] for p in r["per_rank"]])
            tail = tail_s(r)
            rows.append([name, mb, nb, "during backward" if overlap else "after backward",
                         ms(step), ms(wait), ms(tail), ms(r["cost_model"].get("step_s_predicted"))])
            if overlap:
                if tail is not None:
                    pts.append((nb, tail))
                    if best_tail is None or tail < best_tail[1]:
                        best_tail = (mb, tail, nb)
                if best is None or step < best[1]:
                    best = (mb, step, nb)
    cols = ["variant", "--bucket-mb", "buckets", "all-reduce", "step (ms, median)",
            "exposed communication (ms)", "after backward (ms)", "cost model's step (ms)"]
    where = ("2 emulated hosts, 1 Gbit/s links, 1 ms one-way latency" if "--hosts" in links
             else "this machine's loopback (emulated links need root)")
    notes = [f"ring all-reduce (DDP) at 2 processes on {where}; resnet50's gradient shapes "
             f"({S / MiB:.1f} MiB in 161 tensors) with {compute} ms of emulated compute a step; "
             "buckets uniform (--first-bucket-mb 0)",
             "exposed communication: the mean over ranks of the time a step waited for it; after "
             "backward: from the end of backward to the end of the last bucket's all-reduce"]
    fit = fit_overhead(pts)
    chart_series = [{"label": "after backward, measured", "line": False,
                     "points": [(n, t * 1e3) for n, t in pts]}]
    if fit and fit[0] > 0 and fit[1] > 0:
        o, cc = fit
        nstar = math.sqrt(cc / o)
        notes.append(f"fit over the {len(pts)} overlapped runs, after backward = o x buckets + "
                     f"(S/w) / buckets: o = {o * 1e3:.3g} ms per bucket, S/w = {cc * 1e3:.3g} ms "
                     f"(w = {S / cc / 1e6:.3g} MB/s)")
        notes.append(f"predicted best: {nstar:.3g} buckets, of {S / nstar / MiB:.3g} MiB each "
                     "(sqrt(S w o) = S / sqrt(S / (w o)))")
        lo, hi = min(n for n, _ in pts), max(n for n, _ in pts)
        grid = [lo * (hi / lo) ** (k / 40) for k in range(41)] if hi > lo else [lo]
        chart_series.append({"label": "fit: o n + (S/w) / n", "markers": False,
                             "points": [(n, (o * n + cc / n) * 1e3) for n in grid]})
    else:
        notes.append("fit: no positive per-bucket cost and bandwidth fit these runs (the "
                     "differences are within the noise): no prediction")
    for what, b in (("time after backward", best_tail), ("step", best)):
        if b:
            notes.append(f"measured best of the overlapped runs by the {what}: " +
                         ("a bucket per parameter" if b[0] == 0 else f"{b[0]:g} MiB") +
                         f" ({b[2]} bucket{'s' if b[2] != 1 else ''}, {b[1] * 1e3:.4g} ms)")
    chart = rep.line_chart("Time after backward against the number of buckets",
                           "buckets", "ms", chart_series, logx=True)
    return cols, rows, chart, notes


# ---- (c) gather/scatter to rank 0, all-reduce and DDP on 4 hosts (UW-Madison CS744, a2) ----

def gather_allreduce_ddp(c):
    compute, steps, warm = by_size(c, {"smoke": (5, 3, 1), "small": (300, 8, 2),
                                       "full": (300, 40, 5)})
    common = ["--world", "4", "--hosts", "4", "--link", "1gbit", "--model", "vgg11", "--batch",
              "64", "--compute-ms", str(c.compute_ms or compute), "--steps", str(steps),
              "--warmup", str(warm), "--repeat", "1", "--threads", "1", "--timeout", "300"]
    variants = [("gather", "gather/scatter to rank 0 (ps)",
                 ["--mode", "ps", "--bucket-mb", "0", "--no-overlap"], "gather/scatter"),
                ("allreduce", "all_reduce per parameter",
                 ["--mode", "ring", "--bucket-mb", "0", "--no-overlap"], "all_reduce each"),
                ("flat", "one all_reduce of every gradient",
                 ["--mode", "ring", "--bucket-mb", "4096", "--first-bucket-mb", "0",
                  "--no-overlap"], "one all_reduce"),
                ("ddp", "DDP (25 MiB buckets, overlap)", ["--mode", "ring"], "DDP")]
    rows, per_host = [], []
    for tag, name, flags, _ in variants:
        r = load(c.bench(tag, common + flags, name))["runs"][0]
        links = sorted(r.get("links") or [], key=lambda x: x["host"])
        row = [name, ms(r["step_time_s_median"])]
        for h in range(4):
            lk = next((x for x in links if x["host"] == h), None)
            row += [lk["tx_bytes"] / MiB if lk else None, lk["rx_bytes"] / MiB if lk else None]
        row.append(100 * links[0]["busy"] if links else None)
        rows.append(row)
        per_host.append([(row[2 + 2 * h] or 0) + (row[3 + 2 * h] or 0) for h in range(4)])
    cols = ["variant", "step (ms, median)"]
    for h in range(4):
        cols += [f"host {h} sent (MiB/step)", f"host {h} received (MiB/step)"]
    cols.append("host 0's link busy (%)")
    notes = ["VGG-11 (batch norm, CIFAR-10's 32x32) at batch 64 per host, as a profile: its 34 "
             "tensors' real shapes with synthetic gradients and emulated compute (--compute-ms "
             f"{c.compute_ms or compute} a step): gradsync's layered nets have no padded "
             "convolution or batch norm, so it does not train here",
             "4 emulated hosts on 1 Gbit/s links, a rank each; bytes from each host's link "
             "counters (eth0), per measured step, headers included"]
    chart = rep.bar_chart("Bytes on each host's link per step (sent + received)", "MiB per step",
                          [v[3] for v in variants],
                          [{"label": f"host {h}", "values": [p[h] for p in per_host]}
                           for h in range(4)])
    return cols, rows, chart, notes


# ---- (d) strong scaling at a fixed global batch (University of Tartu, PDL homework 1) ----

def strong_scaling(c):
    models, batch, steps, warm, reps = by_size(c, {
        "smoke": (["mlp:784-32-10", "mlp:784-256-256-10"], 64, 4, 1, 1),
        "small": (["mlp:784-128-10", "mlp:784-2048-2048-10"], 256, 30, 5, 1),
        "full": (["mlp:784-128-10", "mlp:784-2048-2048-10"], 256, 30, 5, 3)})
    d = c.bench("strong", ["--mode", "ring", "--strong", "--world", "1,2,4", "--batch",
                           str(batch), "--model", ",".join(models), "--steps", str(steps),
                           "--warmup", str(warm), "--repeat", str(reps), "--threads", "1",
                           "--link", "none", "--timeout", "300"],
                "ranks 1, 2 and 4 at a fixed global batch, both models")
    runs = load(d)["runs"]
    rows, series = [], []
    for k, m in enumerate(models):
        mine = sorted((r for r in runs if r["model"] == m), key=lambda r: r["world"])
        t1 = next((r["step_time_s_median"] for r in mine if r["world"] == 1), None)
        pts = []
        for r in mine:
            t = r["step_time_s_median"]
            sp = t1 / t if t1 and t else None
            rows.append([m, r["world"], r["global_batch"], r["batch"], ms(t), sp,
                         sp / r["world"] if sp else None])
            pts.append((r["world"], sp))
        series.append({"label": m, "points": pts})
    series.append({"label": "ideal (N)", "dashed": True, "markers": False,
                   "points": [(1, 1), (2, 2), (4, 4)], "color": "#888"})
    cols = ["model", "ranks", "global batch", "batch per rank", "step (ms, median)", "speed-up",
            "efficiency"]
    notes = [f"ring all-reduce (DDP) on this machine's loopback, one BLAS thread per rank; "
             f"{steps} steps, the first {warm} left out; step: the median of the others",
             "speed-up = step at 1 rank / step at N ranks (the same global batch, so the same "
             "samples per step); efficiency = speed-up / N",
             f"this machine has {os.cpu_count()} cores: more ranks than cores share them"]
    chart = rep.line_chart("Strong scaling: speed-up against ranks", "ranks", "speed-up", series,
                           xticks=[1, 2, 4])
    return cols, rows, chart, notes


# ---- (e) the master's link saturating: ps against ring on emulated links ----

def master_link(c):
    worlds, model, steps, warm, reps = by_size(c, {
        "smoke": ("2,3", "mlp:784-256-256-10", 8, 2, 1),
        "small": ("2,4,8", "mlp:784-2048-2048-10", 12, 2, 1),
        "full": ("2,4,8", "mlp:784-2048-2048-10", 20, 3, 3)})
    d = c.bench("ps-ring", ["--mode", "ps,ring", "--world", worlds, "--link", "1gbit", "--model",
                            model, "--batch", "16", "--steps", str(steps), "--warmup", str(warm),
                            "--repeat", str(reps), "--timeout", "300"],
                f"ps and ring at {worlds} ranks, a host each")
    rows = {"ps": [], "ring": []}
    for r in load(d)["runs"]:
        links = sorted(r.get("links") or [], key=lambda x: x["host"])
        h0 = links[0] if links else {}
        w = links[1] if len(links) > 1 else {}
        rows[r["mode"]].append([r["mode"], r["world"], ms(r["step_time_s_median"]),
                                ms(r["cost_model"].get("step_s_predicted")),
                                h0.get("tx_bytes", 0) / MiB or None,
                                w.get("tx_bytes", 0) / MiB or None,
                                100 * h0["busy"] if h0 else None, 100 * w["busy"] if w else None])
    out = sorted(rows["ps"], key=lambda r: r[1]) + sorted(rows["ring"], key=lambda r: r[1])
    cols = ["mode", "ranks (hosts)", "step (ms, median)", "cost model's step (ms)",
            "host 0 sent (MiB/step)", "host 1 sent (MiB/step)", "host 0's link busy (%)",
            "host 1's link busy (%)"]
    notes = [f"{model} at batch 16 per rank, one rank per emulated host, 1 Gbit/s links; ps: the "
             "server in rank 0 (host 0) sums and updates, the workers push and pull; ring: "
             "DDP's all-reduce", "busy: the share of the measured steps a link carried data, "
             "either way, from its counters"]
    series = []
    for k, mode in enumerate(("ps", "ring")):
        col = rep.COLORS[k]
        series.append({"label": f"{mode}, measured", "color": col,
                       "points": [(r[1], r[2]) for r in sorted(rows[mode], key=lambda r: r[1])]})
        series.append({"label": f"{mode}, cost model", "color": col, "dashed": True,
                       "markers": False,
                       "points": [(r[1], r[3]) for r in sorted(rows[mode], key=lambda r: r[1])]})
    chart = rep.line_chart("Step time against ranks (a host each)", "ranks", "step (ms)", series,
                           xticks=[int(w) for w in worlds.split(",")])
    return cols, out, chart, notes


# ---- (f) a straggler under bsp, ssp and async ----

def straggler(c):
    steps, batch, reps = by_size(c, {"smoke": (30, 32, 1), "small": (300, 180, 3),
                                     "full": (300, 180, 3)})
    data, notes = [], []
    digits = os.path.join(c.out, "digits")
    try:
        subprocess.run([c.python, os.path.join(c.src, "tools", "digits_idx.py"), digits],
                       check=True, capture_output=True, text=True, timeout=120)
        data = ["--data", f"idx:{digits}/train-images.idx,{digits}/train-labels.idx",
                "--eval-data", f"idx:{digits}/test-images.idx,{digits}/test-labels.idx"]
        notes.append("scikit-learn's 8x8 digits (tools/digits_idx.py), 360 held out")
    except (OSError, subprocess.SubprocessError):
        notes.append("synthetic data: tools/digits_idx.py could not write the digits "
                     "(python3-sklearn missing?), so no held-out accuracy")
    links = (["--hosts", "4", "--link", "1gbit"] if c.root and c.size != "smoke"
             else ["--link", "none"])
    common = ["--world", "4", "--model", "mlp:64-256-256-10", "--batch", str(batch),
              "--momentum", "0", "--lr", "0.2", "--steps", str(steps), "--slow", "3:3",
              "--repeat", str(reps), "--threads", "1", "--timeout", "300"] + links + data
    parts = [("bsp", ["--mode", "ps,ring"], "ps bsp and ring"),
             ("ssp", ["--mode", "ps", "--ps-sync", "ssp:2"], "ps ssp:2"),
             ("async", ["--mode", "ps", "--ps-sync", "async"], "ps async")]
    if c.size == "full":
        parts += [("backup", ["--mode", "ps", "--ps-backup", "1"], "ps with a backup worker"),
                  ("period", ["--mode", "ring", "--ring-period", "4"], "ring, averaging every 4")]
    dirs = [c.bench(tag, common + flags, what) for tag, flags, what in parts]
    cmp_dir = c.bench("compare", ["--compare", ",".join(dirs)], "time to the target loss")
    comp = load(cmp_dir, "compare.json")
    curves = {(d, r["id"]): r.get("loss_curve") or {} for d in dirs for r in load(d)["runs"]}
    rows, series, bsp = [], [], None
    for r in comp["runs"]:
        name = r["mode"] + (f" {r['ps_sync']}" if r["mode"] == "ps" else "") + \
            (f" period {r['ring_period']}" if r.get("ring_period", 0) > 1 else "")
        if name == "ps bsp":
            bsp = r["throughput_samples_per_s"]
        acc = r.get("heldout_accuracy")
        rows.append([name, r["throughput_samples_per_s"], None, r.get("staleness_mean") or 0.0,
                     r.get("staleness_max", 0), r.get("time_to_target_s"),
                     100 * acc if acc is not None else None])
        lc = curves.get((r["dir"], r["id"]), {})
        series.append({"label": name, "markers": False,
                       "points": list(zip(lc.get("t_s", []), lc.get("loss", [])))})
    for row in rows:
        row[2] = row[1] / bsp if bsp else None
    cols = ["mode", "samples/s", "vs ps bsp", "staleness mean", "staleness max",
            "time to target (s)", "held-out accuracy (%)"]
    notes = [f"4 ranks ({'4 emulated hosts, 1 Gbit/s links' if '--hosts' in links else 'loopback'}"
             f"), rank 3 computing 3x as long (--slow 3:3); mlp:64-256-256-10, batch {batch}, "
             f"plain SGD lr 0.2, {steps} steps a rank",
             f"target loss {comp['runs'][0].get('target_loss') or 0:.4g}: 1.10 x the ring's final "
             "smoothed loss; time to target: from the run's first step until its smoothed "
             "training loss first reaches it (none: never)"] + notes
    chart = rep.line_chart("Training loss against wall-clock time", "seconds", "smoothed loss",
                           series)
    return cols, rows, chart, notes


LABS = [
    {"name": "allreduce-sizes", "fn": allreduce_sizes, "root": False,
     "title": "All-reduce time against size and processes",
     "course": "Stanford CS336, assignment 2 (systems): the all-reduce benchmark"},
    {"name": "ddp-variants", "fn": ddp_variants, "root": False,
     "title": "Naive, flat, overlapped and bucketed DDP, and the best bucket size",
     "course": "Stanford CS336, assignment 2 (systems): DDP and its bucket size"},
    {"name": "gather-allreduce-ddp", "fn": gather_allreduce_ddp, "root": True,
     "title": "Gather/scatter to rank 0, all-reduce and DDP on 4 hosts, with each host's bytes",
     "course": "UW-Madison CS744, assignment 2"},
    {"name": "strong-scaling", "fn": strong_scaling, "root": False,
     "title": "Strong scaling at a fixed global batch",
     "course": "University of Tartu, Parallel and Distributed Learning, homework 1"},
    {"name": "master-link", "fn": master_link, "root": True,
     "title": "The master's link saturating: ps against ring on emulated links",
     "course": "gradsync: DataParallel's pattern against DDP's, on a network"},
    {"name": "straggler", "fn": straggler, "root": False,
     "title": "A straggler under bsp, ssp and async",
     "course": "gradsync: consistency models of the parameter server"},
]
