"""slow_jitter.py: --slow and --jitter end to end.

  - bad values are refused with exit 2 and a message naming the flag;
  - ring at world 2 with rank 1 slowed 4x: the header says so, report.json
    has the spec (run and config) and each rank's factor, the per-rank table
    a slow column, the timeline shows rank 1's extra work every step (at
    least 3x its forward + backward) and none on rank 0, and the
    parameters are bitwise those of the run without stragglers (a straggler
    changes time, not results);
  - ps at world 2 with --jitter: both ranks' timelines have the extra
    work, report.json the CV, and the parameters are again the plain run's."""
import json
import os
import sys

from gstest import SMALL, check, finish, load_params, report, run, same_bits, tmpdir

STEPS = ["--steps", "12", "--warmup", "2"]
# compute large enough to stand above a shared machine's noise; progress on
# stdout, where the header is
LOUD = [a for a in SMALL if a != "--quiet"] + ["--model", "mlp:784-256-256-10"]

for args, says in [(["--slow", "3"], "--slow 3: expected RANK"),
                   (["--slow", "1:0.5"], "[1, 1000]"),
                   (["--slow", "x:2"], "whole numbers"),
                   (["--slow", "1,1:2"], "listed twice"),
                   (["--slow", "2:2", "--world", "2"], "rank 2 is outside every --world"),
                   (["--jitter", "-0.1"], "--jitter -0.1"),
                   (["--jitter", "abc"], "--jitter abc")]:
    r = run(args + ["--mode", "ring"] + SMALL)
    check(r.returncode == 2 and says in r.stderr,
          f"{args}: exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}")


def train(mode, extra):
    d, p = tmpdir(), tmpdir()
    r = run(["--mode", mode, "--world", "2", "--out", d, "--save-params", os.path.join(p, "x"),
             "--verify"] + STEPS + LOUD + extra)
    check(r.returncode == 0, f"{mode} {extra}: exit {r.returncode}: {r.stderr[-800:]}")
    return r, (report(d) if r.returncode == 0 else None), d, os.path.join(p, "x")


for mode in ("ring", "ps"):
    _, _, _, plain_p = train(mode, [])
    plain = load_params(plain_p)
    r, rep, d, slow_p = train(mode, ["--slow", "1:4"])
    if rep:
        run0 = rep["runs"][0]
        check(run0["slow"] == "1:4" and rep["config"]["slow"] == "1:4",
              f"{mode}: report.json slow {run0['slow']!r} / config {rep['config'].get('slow')!r}")
        f = [p["slow_factor"] for p in run0["per_rank"]]
        check(f == [1.0, 4.0], f"{mode}: per-rank slow_factor {f}")
        # from the timeline: rank 1's extra work every step is at least 3x its
        # forward + previous backward (busy work runs at least as long as
        # asked, whatever else loads the machine); rank 0 has none
        with open(os.path.join(d, "trace.json")) as fh:
            ev = json.load(fh)["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
        for pid, pname in names.items():
            spans = sorted((e["ts"], e["name"], e["dur"]) for e in ev
                           if e.get("pid") == pid and e.get("ph") == "X" and e.get("tid") == 0)
            fwd, bwd, n = 0.0, None, 0
            for _, name, dur in spans:
                if name == "forward":
                    fwd = dur
                elif name == "backward":
                    bwd = dur
                elif name == "straggle":
                    n += 1
                    want = 3 * (fwd + (bwd if bwd is not None else 2 * fwd))
                    check(dur >= 0.999 * want, f"{mode} {pname}: extra work {dur:.0f} us, "
                          f"want at least {want:.0f} us")
            want_n = 12 if pname.endswith("rank 1") else 0
            check(n == want_n, f"{mode} {pname}: {n} steps stretched, want {want_n}")
        c = [p["compute_s"] for p in run0["per_rank"]]
        print(f"{mode}: compute per step, rank 0 {c[0]*1e3:.2f} ms, rank 1 (4x) {c[1]*1e3:.2f} ms")
        check("stragglers: rank 1 computes 4x as long" in r.stdout,
              f"{mode}: no stragglers line in the header: {r.stdout[:600]}")
        check(" slow\n" in r.stdout and "stragglers: --slow 1:4 --jitter 0" in r.stdout,
              f"{mode}: the per-rank table has no slow column")
        check(same_bits(load_params(slow_p), plain), f"{mode}: --slow changed the parameters")

    r, rep, d, jit_p = train(mode, ["--jitter", "0.5"])
    if rep:
        check(rep["runs"][0]["jitter_cv"] == 0.5 and rep["config"]["jitter_cv"] == 0.5,
              f"{mode}: report.json jitter_cv {rep['runs'][0]['jitter_cv']}")
        with open(os.path.join(d, "trace.json")) as fh:
            ev = json.load(fh)["traceEvents"]
        pids = {e["pid"] for e in ev if e.get("name") == "straggle" and e.get("dur", 0) > 0}
        check(len(pids) >= 2, f"{mode}: --jitter: extra work on {len(pids)} ranks' timelines")
        check(same_bits(load_params(jit_p), plain), f"{mode}: --jitter changed the parameters")

finish("bench_stragglers")
