#!/usr/bin/python3
"""compress_model.py BENCH: the cost model of --compress on the real bench,
loopback.

  - before the run, bench prints the model's word on the compression ("should
    pay" / "should not pay on these links") with both predicted step times and
    the bytes per step; for the mlp 784-1024-1024-10 at world 2 on loopback,
    where the link is memory and PowerSGD's GEMMs cost more than the bytes
    they save, it says "should not pay";
  - the bytes it predicts per compressed step are what the ranks counted:
    report.json's traffic_vs_model is 1 within 10% (it read 0.009 when the
    model ignored compression), and gradient_bytes is the compressed S,
    counted here from the shapes by PowerSGD's rule;
  - after the run, the measured step is printed beside the prediction."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.abspath(sys.argv[1])
failures = []
tmp = tempfile.mkdtemp(prefix="gs_compress_model_")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


env = {k: v for k, v in os.environ.items()
       if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                    "GS_LAUNCHED", "GS_RUN_DIR")}
d = os.path.join(tmp, "run")
r = subprocess.run([BENCH, "--mode", "ring", "--world", "2", "--link", "none", "--repeat", "1",
                    "--threads", "1", "--timeout", "30", "--model", "mlp:784-1024-1024-10",
                    "--batch", "32", "--steps", "8", "--warmup", "2", "--compress", "powersgd:2",
                    "--powersgd-start", "0", "--out", d],
                   capture_output=True, text=True, timeout=240, env=env)
out = r.stdout
print(out[-3000:])
if check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"):
    before, _, after = out.partition("predicted before the runs and measured")
    m = re.search(r"ring world 2, loopback, buckets 25 MiB: (should (?:not )?pay) on these "
                  r"links: step ([0-9.]+) ms uncompressed, ([0-9.]+) ms with powersgd:2", before)
    if check(m, "no prediction printed before the run"):
        print(f"verdict: {m.group(1)} ({m.group(2)} ms uncompressed, {m.group(3)} ms compressed)")
        check(m.group(1) == "should not pay", f"loopback verdict: {m.group(1)}")
        check(float(m.group(3)) > float(m.group(2)), "the compressed step is not predicted longer")
    check(re.search(r"compressing [0-9.]+ ms per step \(measured here\)", before),
          "the compression's own work is not shown")
    check(re.search(r"model [0-9.]+ ms \(should not pay; uncompressed [0-9.]+ ms\), measured "
                    r"[0-9.]+ ms", after), "no measurement beside the prediction after the run")
    with open(os.path.join(d, "report.json")) as f:
        run = json.load(f)["runs"][0]
    # every weight as P and Q ((10 + 1024) x 2 x 2 < 10 x 1024 for fc3 too), the
    # biases as they are
    S = 4 * (10 + 1024 + 1024 + (10 + 1024) * 2 + (1024 + 1024) * 2 + (1024 + 784) * 2)
    check(run["gradient_bytes"] == S, f"gradient_bytes {run['gradient_bytes']}, expected {S}")
    for p in run["per_rank"]:
        v = p["traffic_vs_model"]
        print(f"rank {p['rank']}: sent {p['bytes_sent']:.0f} B, model "
              f"{p['model_bytes_sent']:.0f} B per step, vs model {v:.3f}x")
        check(0.95 <= v <= 1.10, f"rank {p['rank']}: traffic_vs_model {v}")
shutil.rmtree(tmp, ignore_errors=True)
if failures:
    print(f"compress_model: {len(failures)} failure(s)")
    sys.exit(1)
print("compress_model: all checks passed")
