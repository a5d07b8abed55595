#!/usr/bin/python3
"""compress_model.py BENCH: the cost model of --compress on the real bench,
loopback.

  - before the run, bench prints the model's word on the compression ("should
    pay" / "should not pay on these links") with both predicted step times and
    the bytes per step; for the mlp 784-1024-1024-10 at world 2 on loopback,
    where the link is memory and PowerSGD's GEMMs cost more than the bytes
    they save, it says "should not pay" (or "about even" where a loaded
    machine measured itself slow), never "should pay";
  - the bytes it predicts per compressed step are what the ranks counted:
    report.json's traffic_vs_model is 1 within 10% (it read 0.009 when the
    model ignored compression), and gradient_bytes is the compressed S,
    counted here from the shapes by PowerSGD's rule;
  - after the run, the measured step is printed beside the prediction."""
import os
import re

from gstest import check, finish, report, run, tmpdir

d = os.path.join(tmpdir(), "run")
r = run(["--mode", "ring", "--world", "2", "--link", "none", "--repeat", "1", "--threads", "1",
         "--timeout", "30", "--model", "mlp:784-1024-1024-10", "--batch", "32", "--steps", "8",
         "--warmup", "2", "--compress", "powersgd:2", "--powersgd-start", "0", "--out", d],
        timeout=240)
out = r.stdout
print(out[-3000:])
if check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"):
    before, _, after = out.partition("predicted before the runs and measured")
    m = re.search(r"ring world 2, loopback, buckets 25 MiB: (should (?:not )?pay|about even "
                  r"\(within 5%\)) on these links: step ([0-9.]+) ms uncompressed, ([0-9.]+) ms "
                  r"with powersgd:2", before)
    if check(m, "no prediction printed before the run"):
        print(f"verdict: {m.group(1)} ({m.group(2)} ms uncompressed, {m.group(3)} ms compressed)")
        # the machine is measured just before, so a loaded machine may call
        # it even; what must never be is a forecast that compression pays
        check(m.group(1) != "should pay", f"loopback verdict: {m.group(1)}")
        check(float(m.group(3)) > 0.95 * float(m.group(2)),
              "the compressed step is predicted more than 5% shorter on loopback")
    check(re.search(r"compressing [0-9.]+ ms per step \(measured here\)", before),
          "the compression's own work is not shown")
    check(re.search(r"model [0-9.]+ ms \((?:should not pay|about even \(within 5%\)); "
                    r"uncompressed [0-9.]+ ms\), measured [0-9.]+ ms", after),
          "no measurement beside the prediction after the run")
    run0 = report(d)["runs"][0]
    # every weight as P and Q ((10 + 1024) x 2 x 2 < 10 x 1024 for fc3 too), the
    # biases as they are
    S = 4 * (10 + 1024 + 1024 + (10 + 1024) * 2 + (1024 + 1024) * 2 + (1024 + 784) * 2)
    check(run0["gradient_bytes"] == S, f"gradient_bytes {run0['gradient_bytes']}, expected {S}")
    for p in run0["per_rank"]:
        v = p["traffic_vs_model"]
        print(f"rank {p['rank']}: sent {p['bytes_sent']:.0f} B, model "
              f"{p['model_bytes_sent']:.0f} B per step, vs model {v:.3f}x")
        check(0.95 <= v <= 1.10, f"rank {p['rank']}: traffic_vs_model {v}")
finish("compress_model")
