"""heldout.py: held-out accuracy along the run (--eval-data, --eval-every) on
the digits:

  - ps at world 2 with --eval-every 50 over 200 steps: report.json's
    heldout_curve has the points after steps 50, 100, 150 and 200, on the
    loss curve's clock (increasing, within the run), its last point is the
    run's held-out accuracy, and accuracy rises along it;
  - each point is the parameters after its step: a 50-step run of the same
    job ends with exactly the first point's accuracy and loss;
  - a run whose length is not a multiple of N still ends with a point, and
    without --eval-every the curve has 20 points;
  - accuracy.svg draws one line per run, report.html shows it, and
    `bench --report` draws it again from report.json alone;
  - --eval-every without --eval-data, or of 0, is refused (exit 2).
Skips (77) where python3-sklearn is not installed."""
import os

from gstest import check, digits, finish, report, run, tmpdir

a = digits("bench_heldout")
data = f"idx:{a}/train-images.idx,{a}/train-labels.idx"
held = f"idx:{a}/test-images.idx,{a}/test-labels.idx"
base = ["--model", "mlp:64-64-10", "--data", data, "--batch", "32", "--lr", "0.05",
        "--threads", "1", "--timeout", "20", "--link", "none", "--repeat", "1",
        "--log-every", "1000", "--eval-data", held]
ps = ["--mode", "ps", "--world", "2"]


def curve(out):
    r0 = report(out)["runs"][0]
    return r0, r0["heldout_curve"]


out = tmpdir()
r = run(ps + base + ["--steps", "200", "--eval-every", "50", "--out", out])
first = None
if check(r.returncode == 0, f"ps --eval-every 50: exit {r.returncode}: {r.stderr[-600:]}"):
    r0, h = curve(out)
    print(f"ps w2, 200 steps, every 50: steps {h['step']}, accuracy "
          f"{[round(x, 4) for x in h['accuracy']]}, t_s {[round(x, 3) for x in h['t_s']]}")
    check(h["step"] == [49, 99, 149, 199], f"points after steps {h['step']}")
    ts, loss_t = h["t_s"], r0["loss_curve"]["t_s"]
    check(all(0 < x < y for x, y in zip(ts, ts[1:])), f"t_s not increasing from 0: {ts}")
    check(ts[-1] <= loss_t[-1] + 1e-9, f"last point at {ts[-1]} s, after the loss curve's "
          f"end {loss_t[-1]} s")
    check(h["accuracy"][-1] == r0["heldout_accuracy"] and h["loss"][-1] == r0["heldout_loss"],
          f"last point {h['accuracy'][-1]} / {h['loss'][-1]}, the run's end "
          f"{r0['heldout_accuracy']} / {r0['heldout_loss']}")
    check(h["accuracy"][0] < h["accuracy"][-1] and h["loss"][0] > h["loss"][-1],
          f"no learning along the curve: {h['accuracy']} {h['loss']}")
    first = (h["accuracy"][0], h["loss"][0])
    with open(os.path.join(out, "accuracy.svg")) as f:
        svg = f.read()
    check(svg.count("<polyline") == 1 and "Held-out accuracy" in svg,
          f"accuracy.svg: {svg.count('<polyline')} lines")
    with open(os.path.join(out, "report.html")) as f:
        check("Held-out accuracy against" in f.read(), "report.html lacks accuracy.svg")
    os.remove(os.path.join(out, "accuracy.svg"))
    rr = run(["--report", out])
    check(rr.returncode == 0 and os.path.exists(os.path.join(out, "accuracy.svg")),
          f"--report did not draw accuracy.svg again: {rr.returncode} {rr.stderr[-300:]}")

# the first point is the parameters after step 50: a job of 50 steps ends there
out50 = tmpdir()
r = run(ps + base + ["--steps", "50", "--out", out50])
if check(r.returncode == 0, f"ps 50 steps: exit {r.returncode}: {r.stderr[-600:]}") and first:
    r0 = report(out50)["runs"][0]
    end = (r0["heldout_accuracy"], r0["heldout_loss"])
    print(f"50 steps end with {end}; the 200-step run's point after step 50: {first}")
    check(end == first, f"the point after step 50 {first} is not a 50-step run's end {end}")

out = tmpdir()
r = run(["--mode", "local"] + base + ["--steps", "20", "--eval-every", "7", "--out", out])
if check(r.returncode == 0, f"local --eval-every 7: exit {r.returncode}: {r.stderr[-600:]}"):
    steps = curve(out)[1]["step"]
    check(steps == [6, 13, 19], f"20 steps every 7: points after {steps}")
out = tmpdir()
r = run(["--mode", "local"] + base + ["--steps", "300", "--out", out])
if check(r.returncode == 0, f"local default: exit {r.returncode}: {r.stderr[-600:]}"):
    steps = curve(out)[1]["step"]
    check(steps == list(range(14, 300, 15)), f"300 steps by default: points after {steps}")

r = run(["--mode", "local", "--steps", "5", "--eval-every", "2", "--out", tmpdir()])
check(r.returncode == 2 and "--eval-data" in r.stderr,
      f"--eval-every without --eval-data: {r.returncode} {r.stderr[-300:]}")
r = run(["--mode", "local"] + base + ["--steps", "5", "--eval-every", "0", "--out", tmpdir()])
check(r.returncode == 2 and "--eval-every" in r.stderr,
      f"--eval-every 0: {r.returncode} {r.stderr[-300:]}")
finish("bench_heldout")
