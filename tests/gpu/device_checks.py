#!/usr/bin/env python3
"""device_checks.py: the thresholds of tests/gpu/device_run.sh's measuring
sections, applied to the files those sections write, so that each section
can fail when its result is wrong (and so that the thresholds are tested
where there is no GPU: tests/gpu/test_device_checks.py).

Each prints one line per check, "PASS<TAB>what", "FAIL<TAB>what" or
"SKIP<TAB>what: why", for device_run.sh to count; exit 0 once it has
judged (whatever the verdicts), 2 when it cannot read its input.

  torch JSON           compare_single.py --json: at batch 1024, gradsync's
                       median samples/s >= 0.95x eager PyTorch's, and
                       >= 0.95x PyTorch's with the step in a CUDA graph
                       where that ran (SKIP with its reason where not)
  modes REPORT...      bench --mode M --world 1 for local, ring and ps (one
                       run each: a list of modes runs world 1 once, as
                       local): ring's and ps's throughput >= 0.90x
                       local's (at world 1
                       nothing moves between ranks: a copy of the 22 MiB
                       gradient through the host each step would cost a
                       millisecond, the whole 1 ms step, and cross it)
  gemm OURS THEIRS     gemm_bench and torch_gemm.py tables: the step's
                       GEMMs at batch 1024 >= 0.95x torch.matmul's TFLOP/s
  sweep REPORT         bench --mode ps,ring --world 2,4,8 on the CPU: every
                       run measured all its steps with a finite loss, and
                       ps and ring reach the same final loss at each world
                       within 1e-5 relative (synchronous SGD on the same
                       data: the same parameters but for the summation
                       order, held to 1e-5 by tests/worker/equivalence.py)
  hosts REPORT PROJ    the cost model fitted on 2 emulated hosts:
                       projected / measured step time within [0.75, 1.25]
                       at every mode and size (a model that forgot a
                       factor, (N-1)/N at N = 2 or the master's N - 1
                       copies, is off by 2x or more)"""
import json
import math
import statistics
import sys

MIN_VS_TORCH = 0.95
MIN_VS_LOCAL = 0.90
LOSS_RTOL = 1e-5
MODEL_BAND = (0.75, 1.25)


def say(verdict, what):
    print(f"{verdict}\t{what}", flush=True)


def judge(cond, what):
    say("PASS" if cond else "FAIL", what)


def load(path):
    with open(path) as f:
        return json.load(f)


def torch(path):
    doc = load(path)
    rows = [r for r in doc["rows"] if r["batch"] == 1024]
    if not rows:
        say("FAIL", "training throughput vs PyTorch: no batch 1024 row")
        return
    for r in rows:
        ours = statistics.median(r["gradsync"])
        eager = statistics.median(r["pytorch"])
        judge(ours >= MIN_VS_TORCH * eager,
              f"training throughput at batch 1024, threads {r['threads']}: gradsync "
              f"{ours:.0f} samples/s, {ours / eager:.2f}x eager PyTorch's {eager:.0f} "
              f"(at least {MIN_VS_TORCH}x)")
        if not doc.get("graph_asked"):
            say("SKIP", "PyTorch with CUDA graphs: not asked for (compare_single.py --graph)")
        elif not r.get("pytorch_graph"):
            say("SKIP", f"PyTorch with CUDA graphs: {doc.get('graph_unavailable') or 'no runs'}")
        else:
            graph = statistics.median(r["pytorch_graph"])
            judge(ours >= MIN_VS_TORCH * graph,
                  f"training throughput at batch 1024, threads {r['threads']}: gradsync "
                  f"{ours:.0f} samples/s, {ours / graph:.2f}x PyTorch with CUDA graphs' "
                  f"{graph:.0f} (at least {MIN_VS_TORCH}x)")


def modes(*paths):
    runs = {r["mode"]: r for p in paths for r in load(p)["runs"] if r["world"] == 1}
    if "local" not in runs:
        say("FAIL", "GPU modes at world 1: no local run in the report")
        return
    local = runs["local"]["throughput_samples_per_s"]
    for mode in ("ring", "ps"):
        r = runs.get(mode)
        if r is None:
            say("FAIL", f"GPU modes at world 1: no {mode} run in the report")
            continue
        x = r["throughput_samples_per_s"]
        judge(x >= MIN_VS_LOCAL * local,
              f"{mode} at world 1 on the GPU: {x:.0f} samples/s, {x / local:.2f}x local's "
              f"{local:.0f} (at least {MIN_VS_LOCAL}x: nothing moves between ranks)")


def step_tflops(path, batch):
    """TFLOP/s of the 'step' row at batch in a gemm table"""
    for line in open(path):
        f = line.split()
        if len(f) >= 4 and f[0] == str(batch) and f[1] == "step":
            return float(f[-1])
    return None


def gemm(ours_path, theirs_path, batch=1024):
    ours, theirs = step_tflops(ours_path, batch), step_tflops(theirs_path, batch)
    if ours is None or theirs is None:
        say("FAIL", f"GEMMs vs torch.matmul: no batch {batch} step row in "
            f"{ours_path if ours is None else theirs_path}")
        return
    judge(ours >= MIN_VS_TORCH * theirs,
          f"the step's GEMMs at batch {batch} ({ours_path.rsplit('/', 1)[-1]}): {ours:.1f} "
          f"TFLOP/s, {ours / theirs:.2f}x torch.matmul's {theirs:.1f} (at least {MIN_VS_TORCH}x)")


def sweep(path):
    runs = load(path)["runs"]
    if not runs:
        say("FAIL", "CPU sweep: no runs in the report")
        return
    for r in runs:
        loss = r.get("final_loss")
        want = r["steps"] - r["warmup_steps"]
        judge(r.get("measured_steps") == want and isinstance(loss, (int, float)) and
              math.isfinite(loss),
              f"CPU sweep {r['mode']} world {r['world']}: {r.get('measured_steps')} of {want} "
              f"steps measured, final loss {loss}")
    by = {(r["mode"], r["world"]): r.get("final_loss") for r in runs}
    for w in sorted({r["world"] for r in runs}):
        a, b = by.get(("ps", w)), by.get(("ring", w))
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (a, b)):
            say("FAIL", f"CPU sweep world {w}: ps's and ring's final losses {a}, {b}")
            continue
        judge(abs(a - b) <= LOSS_RTOL * abs(b),
              f"CPU sweep world {w}: ps and ring reach the same final loss ({a:.9g} and "
              f"{b:.9g}, within {LOSS_RTOL:g} relative)")


def hosts(report_path, projection_path):
    runs = load(report_path)["runs"]
    proj = {(r["mode"], r["world"]): r for r in load(projection_path)["rows"]}
    print("mode  hosts  step ms projected  measured (median)  projected/measured")
    judged = 0
    for r in runs:
        p = proj.get((r["mode"], r["world"]))
        if not p:
            continue
        m, q = 1e3 * r["step_time_s_median"], 1e3 * p["step_s_predicted"]
        print(f"{r['mode']:<5} {r['world']:>5}  {q:>17.1f}  {m:>17.1f}  {q / m:>18.2f}")
        lo, hi = MODEL_BAND
        judge(lo <= q / m <= hi, f"cost model, {r['mode']} on {r['world']} emulated hosts: "
              f"projected/measured {q / m:.2f} (within [{lo}, {hi}])")
        judged += 1
    if not judged:
        say("FAIL", "cost model: no run of the report has a projection")


CHECKS = {"torch": (torch, 1), "modes": (modes, None), "gemm": (gemm, 2), "sweep": (sweep, 1),
          "hosts": (hosts, 2)}

if __name__ == "__main__":
    n = CHECKS[sys.argv[1]][1] if len(sys.argv) > 1 and sys.argv[1] in CHECKS else -1
    if n == -1 or (n is None and len(sys.argv) < 3) or (n is not None and len(sys.argv) != 2 + n):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        CHECKS[sys.argv[1]][0](*sys.argv[2:])
    except (OSError, ValueError, KeyError, TypeError, IndexError) as ex:
        print(f"device_checks.py {sys.argv[1]}: cannot read its input: {ex!r}", file=sys.stderr)
        sys.exit(2)
