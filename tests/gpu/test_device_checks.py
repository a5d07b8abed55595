#!/usr/bin/env python3
"""test_device_checks.py: the thresholds of tests/gpu/device_run.sh
(tests/gpu/device_checks.py) pass what is right and fail what is wrong, on
made-up section outputs, here where there is no GPU: a gradsync 0.94x
PyTorch at batch 1024 fails, 0.96x passes; PyTorch's CUDA graph that did
not run is a SKIP with its reason, not a pass; a ps at world 1 at 0.5x
local's throughput fails; GEMMs at 0.9x torch.matmul's fail; a CPU sweep
whose ps and ring part ways, or that lost steps or diverged, fails; a cost
model off by 2x fails.

    test_device_checks.py"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "device_checks.py")
failures = 0


def verdicts(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=30)
    lines = [line.split("\t", 1) for line in r.stdout.splitlines() if "\t" in line]
    return r.returncode, [v for v, _ in lines], r.stdout + r.stderr


def expect(args, want, what, code=0):
    global failures
    rc, got, out = verdicts(*args)
    if rc != code or got != want:
        failures += 1
        print(f"FAIL {what}: exit {rc} (want {code}), verdicts {got} (want {want})\n{out}")
    else:
        print(f"ok   {what}: {' '.join(got) or f'exit {rc}'}")


def dump(d, name, doc):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        if isinstance(doc, str):
            f.write(doc)
        else:
            json.dump(doc, f)
    return path


def throughput(ratio, graph=None, why=None, asked=True):
    row64 = {"threads": 1, "batch": 64, "gradsync": [3.0] * 3, "pytorch": [1.0] * 3,
             "pytorch_graph": [2.0] * 3 if graph else None}
    row = {"threads": 1, "batch": 1024, "gradsync": [ratio * 100.0, ratio * 101, ratio * 99],
           "pytorch": [100.0, 99.0, 101.0],
           "pytorch_graph": [graph * 100, graph * 100, graph * 100] if graph else None}
    return {"graph_asked": asked, "graph_unavailable": why, "rows": [row64, row]}


def run(mode, world, thr=1000.0, loss=2.5, steps=30, warmup=5, measured=25, step_s=0.1):
    return {"mode": mode, "world": world, "throughput_samples_per_s": thr, "final_loss": loss,
            "steps": steps, "warmup_steps": warmup, "measured_steps": measured,
            "step_time_s_median": step_s}


GEMM = """title line
batch  gemm            m      n      k         us   TFLOP/s
64     step                                 130.9     15.51
1024   step                                 {us}     {tf}
"""

with tempfile.TemporaryDirectory() as t:
    # 1. against PyTorch
    expect(["torch", dump(t, "a.json", throughput(0.96, graph=0.99))], ["PASS", "PASS"],
           "0.96x eager and 0.97x graphed PyTorch")
    expect(["torch", dump(t, "b.json", throughput(0.94, graph=0.9))], ["FAIL", "PASS"],
           "0.94x eager PyTorch fails")
    expect(["torch", dump(t, "c.json", throughput(1.0, graph=1.2))], ["PASS", "FAIL"],
           "0.83x PyTorch with CUDA graphs fails")
    expect(["torch", dump(t, "d.json", throughput(1.0, why="torch 1.13 has no torch.cuda.graph"))],
           ["PASS", "SKIP"], "the CUDA graph did not run: SKIP, not PASS")
    expect(["torch", dump(t, "e.json", throughput(1.0, asked=False))], ["PASS", "SKIP"],
           "the CUDA graph not asked for: SKIP")
    no1024 = throughput(1.0)
    no1024["rows"] = no1024["rows"][:1]
    expect(["torch", dump(t, "f.json", no1024)], ["FAIL"], "no batch 1024 measured")
    expect(["torch", os.path.join(t, "nothing.json")], [], "no file", code=2)
    for i, doc in enumerate(({"rows": [{"batch": 1024}]}, "not json")):
        expect(["torch", dump(t, f"bad{i}.json", doc)], [], f"an unreadable table ({i})", code=2)
    # 2. the modes at world 1
    ok = {"runs": [run("local", 1), run("ring", 1, 990.0), run("ps", 1, 950.0)]}
    expect(["modes", dump(t, "m1.json", ok)], ["PASS", "PASS"], "ring 0.99x, ps 0.95x local")
    slow = {"runs": [run("local", 1), run("ring", 1, 990.0), run("ps", 1, 500.0)]}
    expect(["modes", dump(t, "m2.json", slow)], ["PASS", "FAIL"], "ps at 0.5x local fails")
    expect(["modes", dump(t, "m3.json", {"runs": [run("local", 1), run("ring", 1)]})],
           ["PASS", "FAIL"], "a mode missing fails")
    expect(["modes", dump(t, "m4.json", {"runs": [run("local", 1)]}),
            dump(t, "m5.json", {"runs": [run("ring", 1, 995.0)]}),
            dump(t, "m6.json", {"runs": [run("ps", 1, 899.0)]})],
           ["PASS", "FAIL"], "one report per mode: ps at 0.899x local fails")
    expect(["modes"], [], "no report", code=2)
    # 3. GEMMs
    theirs = dump(t, "theirs.txt", GEMM.format(us=786.7, tf=41.28))
    expect(["gemm", dump(t, "ours.txt", GEMM.format(us=750.0, tf=43.30)), theirs], ["PASS"],
           "GEMMs at 1.05x torch.matmul")
    expect(["gemm", dump(t, "slow.txt", GEMM.format(us=870.0, tf=37.2)), theirs], ["FAIL"],
           "GEMMs at 0.90x torch.matmul fail")
    expect(["gemm", dump(t, "none.txt", "batch  gemm\n64 step 1 2\n"), theirs], ["FAIL"],
           "no batch 1024 step row")
    # 4. the CPU sweep
    good = {"runs": [run(m, w, loss=2.29 + w / 100) for w in (2, 4) for m in ("ps", "ring")]}
    expect(["sweep", dump(t, "s1.json", good)], ["PASS"] * 6, "a sweep that agrees")
    apart = json.loads(json.dumps(good))
    apart["runs"][1]["final_loss"] *= 1 + 1e-4
    expect(["sweep", dump(t, "s2.json", apart)], ["PASS"] * 4 + ["FAIL", "PASS"],
           "ps and ring 1e-4 apart at world 2 fail")
    lost = json.loads(json.dumps(good))
    lost["runs"][2]["measured_steps"] = 20
    expect(["sweep", dump(t, "s3.json", lost)], ["PASS", "PASS", "FAIL", "PASS", "PASS", "PASS"],
           "a run that measured 20 of 25 steps fails")
    diverged = json.loads(json.dumps(good))
    diverged["runs"][0]["final_loss"] = None  # JSON has no NaN: bench writes null
    diverged["runs"][1]["final_loss"] = None
    expect(["sweep", dump(t, "s4.json", diverged)], ["FAIL", "FAIL", "PASS", "PASS", "FAIL",
                                                     "PASS"],
           "two runs without a finite loss fail, also where they agree")
    # 5. the cost model on emulated hosts
    measured = {"runs": [run("ps", 2, step_s=0.103), run("ring", 8, step_s=0.129)]}
    rep = dump(t, "h.json", measured)
    good = {"rows": [{"mode": "ps", "world": 2, "step_s_predicted": 0.106},
                     {"mode": "ring", "world": 8, "step_s_predicted": 0.117}]}
    expect(["hosts", rep, dump(t, "p1.json", good)], ["PASS", "PASS"], "a model within 10%")
    off = {"rows": [{"mode": "ps", "world": 2, "step_s_predicted": 0.05},
                    {"mode": "ring", "world": 8, "step_s_predicted": 0.117}]}
    expect(["hosts", rep, dump(t, "p2.json", off)], ["FAIL", "PASS"], "a model off by 2x fails")
    expect(["hosts", rep, dump(t, "p3.json", {"rows": []})], ["FAIL"], "no projection at all")
    expect(["nosuch", rep], [], "an unknown check", code=2)

sys.exit(1 if failures else 0)
