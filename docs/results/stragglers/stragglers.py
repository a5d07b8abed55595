#!/usr/bin/python3
"""stragglers.py: docs/stragglers.md's experiment for teachers: one straggler
(rank 3 computes 3x as long, --slow 3:3) among four emulated hosts, and six
ways to live with it (ring, ps bsp, ps ssp:2, ps async, ps with one backup
worker, the ring averaging every 4 steps), on the MLP and digits of the page,
judged by samples/s and by the time to one target loss. Why a script: the
page's figures (what backup workers and ssp gain, the straggler model within
25%) come from hand-made files until then; a newcomer reruns this unchanged
(issue 46). A sitting is the page's commands, from a folder of its own, with
COMMON as below:

    bench --mode ps,ring $COMMON --out A
    T = 1.10 x the ring's final smoothed loss (A/report.json's target_loss)
    bench --mode ps --ps-sync ssp:2 $COMMON --target-loss $T --out B
    bench --mode ps --ps-sync async $COMMON --target-loss $T --out C
    bench --mode ps --ps-backup 1   $COMMON --target-loss $T --out E
    bench --mode ring --ring-period 4 $COMMON --target-loss $T --out F
    bench --compare A,B,C,E,F --out CMP

    COMMON = --world 4 --hosts 4 --link L [--host-cpus X] --model mlp:64-256-256-10
             --batch B --momentum 0 --lr 0.2 (--momentum: 0.9 and 0.02) --steps 300
             --slow 3:3 --repeat 3 --threads 1 --data idx:digits/train-*
             --eval-data idx:digits/test-*     (OPENBLAS_NUM_THREADS=1)

Per sitting and configuration (a --batch and a --host-cpus, every pair, in
the order given) the file keeps what `bench --compare` printed, the page's
table read from the five report.json files, each smoothed loss curve's
lowest and highest points, run A's first lines (the model's size) and every
run's summary as bench printed it (the per-rank rows: compute, wait, step,
bytes; who waited for whom). Writes
docs/results/stragglers/<date>-stragglers-<variant>.txt, its first lines
from tools/results_header.py (a clean commit, bench built from it).

The page's variants (file name's <variant>), and their time on the page's
2-core VM, from the samples/s of the hand-made files of 2026-11-26/27 (300
steps x 720 or 1440 samples per run, 18 runs a sitting) and about half a
second of start per run:
  stragglers.py --sittings 3 --charts docs/stragglers   1gbit, ~4 min
  stragglers.py --link 10gbit                           10gbit, ~1 min
  stragglers.py --momentum --sittings 2                 1gbit-momentum, ~3-5 min
  stragglers.py --host-cpus none,0.5 --batch 180,360 --sittings 2
                                                        1gbit-host-cpus-batch-180-360, ~28 min
  --quick: 20 steps, --repeat 1 (a check of the script, not a result; seconds)

Needs root (emulated hosts) and Debian's python3-sklearn for the digits
(/usr/bin/python3 tools/digits_idx.py)."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import results_header  # noqa: E402

PY = "/usr/bin/python3"
MODEL = "mlp:64-256-256-10"
# the sweeps of a sitting: (its folder, bench's flags), A first (it derives T)
SWEEPS = [("A", ["--mode", "ps,ring"]),
          ("B", ["--mode", "ps", "--ps-sync", "ssp:2"]),
          ("C", ["--mode", "ps", "--ps-sync", "async"]),
          ("E", ["--mode", "ps", "--ps-backup", "1"]),
          ("F", ["--mode", "ring", "--ring-period", "4"])]
ORDER = ["ring", "ps bsp", "ps ssp:2", "ps async", "ps backup 1", "ring period 4"]
CHARTS = ["loss.svg", "accuracy.svg", "staleness.svg"]
TIMEOUT_S = 1200  # one bench invocation; the longest (A, capped, batch 360) takes about 2 min


def common(link, cap, batch, momentum, steps, repeat, data):
    c = ["--world", "4", "--hosts", "4", "--link", link]
    if cap != "none":
        c += ["--host-cpus", cap]
    c += ["--model", MODEL, "--batch", str(batch)]
    c += ["--momentum", "0.9", "--lr", "0.02"] if momentum else ["--momentum", "0", "--lr", "0.2"]
    c += ["--steps", str(steps), "--slow", "3:3", "--repeat", str(repeat), "--threads", "1",
          "--data", f"idx:{data}/train-images.idx,{data}/train-labels.idx",
          "--eval-data", f"idx:{data}/test-images.idx,{data}/test-labels.idx"]
    return c


def name(r):
    """a run's name on the page"""
    if r["mode"] == "ring":
        return "ring period %d" % r["ring_period"] if r["ring_period"] > 1 else "ring"
    return {"bsp": "ps bsp", "ssp:2": "ps ssp:2", "async": "ps async",
            "bsp+backup:1": "ps backup 1"}[r["ps_sync"]]


def runs_of(d):
    """{page name: run} from the five report.json files of one sitting"""
    by = {}
    for x, _ in SWEEPS:
        with open(os.path.join(d, x, "report.json")) as f:
            for run in json.load(f)["runs"]:
                by[name(run)] = run
    return by


def page_table(d):
    """the page's table, as docs/stragglers.md prints it (its units, its rounding)"""
    by = runs_of(d)
    bsp = by["ps bsp"]["throughput_samples_per_s"]
    out = ["| mode | samples/s [min-max] | vs ps bsp | model | vs model | staleness mean / max | "
           "dropped | time to target | final loss | held-out accuracy |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for k in ORDER:
        r = by[k]
        t = r["throughput_samples_per_s"]
        reps = r["repeats"]["throughput_samples_per_s"] if r.get("repeats") else [t]
        m = r["straggler_model"]["samples_per_s"]
        sm = r["staleness_mean"]
        st = f"{sm:.2f} / {r['staleness_max']}" if sm is not None and r["staleness_max"] else "0"
        tt = r["time_to_target_s"]
        out.append(f"| {k} | {t:.0f} [{min(reps):.0f}-{max(reps):.0f}] | "
                   f"{'1' if k == 'ps bsp' else f'{t / bsp:.2f}x'} | {m:.0f} | {t / m:.2f}x | "
                   f"{st} | {r['dropped_gradients']} | {f'{tt:.2f} s' if tt is not None else 'never'} | "
                   f"{r['final_loss']:.4f} | {100 * r['heldout_accuracy']:.1f}% |")
    with open(os.path.join(d, "A", "report.json")) as f:
        git = json.load(f)["environment"]["git_revision"]
    out.append(f"target {by['ring']['target_loss']} git {git}")
    return out


def curve_table(d):
    """each run's smoothed training loss (report.json's loss_curve, the median
    run's): its lowest point, and its highest after the first quarter of the
    run's time (a curve that climbs back up shows there)"""
    by = runs_of(d)
    out = ["| mode | target | lowest smoothed loss | at | highest after the first quarter |",
           "|---|---|---|---|---|"]
    for k in ORDER:
        r = by[k]
        ts, ls = r["loss_curve"]["t_s"], r["loss_curve"]["loss"]
        i = min(range(len(ls)), key=ls.__getitem__)
        late = [v for t, v in zip(ts, ls) if t >= ts[-1] / 4]
        out.append(f"| {k} | {r['target_loss']:.4f} | {ls[i]:.4f} | {ts[i]:.2f} s | "
                   f"{max(late):.4f} |")
    return out


def run_blocks(log):
    """the per-run summaries bench printed ('== ps  world 4 ... ==' to the next '== ')"""
    out, keep = [], False
    for line in log.splitlines():
        if line.startswith("== "):
            keep = " world " in line and line.rstrip().endswith("==")
        if keep:
            out.append(line)
    return out


def shown(argv):
    """a command as the file shows it: the bench from the repository's root"""
    return shlex.join([os.path.relpath(x, ROOT) if x.startswith(ROOT + "/") else x for x in argv])


def sitting(bench, d, label, com, env):
    """run one sitting's six commands in d; (the file's lines, seconds)"""
    t0, load0 = time.time(), os.getloadavg()[0]
    os.makedirs(d)
    os.chmod(d, 0o755)  # every host's rank writes its rows there
    cmds, logs, target = [], {}, None
    for x, flags in SWEEPS + [("CMP", None)]:
        if flags is None:
            argv = [bench, "--compare", ",".join(s for s, _ in SWEEPS), "--out", "CMP"]
        else:
            argv = [bench] + flags + com + (["--target-loss", target] if target else []) + \
                ["--out", x]
        cmds.append(shown(argv) + f" > {x}.log 2>&1")
        print(f"stragglers.py: {label}: {x}", file=sys.stderr)
        try:
            r = subprocess.run(argv, cwd=d, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            sys.exit(f"stragglers.py: {label}: run {x} took over {TIMEOUT_S} s (in {d}):\n"
                     f"  {shown(argv)}")
        with open(os.path.join(d, x + ".log"), "w") as f:
            f.write(r.stdout)
        if r.returncode != 0:
            sys.exit(f"stragglers.py: {label}: run {x} failed, exit {r.returncode} (its log: "
                     f"{d}/{x}.log):\n  {shown(argv)}\n{r.stdout[-2500:]}")
        logs[x] = r.stdout
        if x == "A":
            with open(os.path.join(d, "A", "report.json")) as f:
                ring = [y for y in json.load(f)["runs"] if y["mode"] == "ring"]
            if not ring or ring[0].get("target_loss") is None:
                sys.exit(f"stragglers.py: {label}: run A's report.json has no ring run with a "
                         f"target_loss (in {d})")
            target = repr(ring[0]["target_loss"])  # as the originals' python3 -c print() wrote it
    secs = time.time() - t0
    lines = [f"# {label}: {secs:.0f} s, load average {load0:.1f} before, "
             f"{os.getloadavg()[0]:.1f} after; the commands, run from a folder of its own "
             "beside digits (build/bench/bench: the repository's):"]
    lines += ["#   " + c for c in cmds] + ["", "# what bench --compare printed (CMP.log):"]
    lines += logs["CMP"].rstrip("\n").splitlines()
    lines += ["", "# the page's table, from the five report.json files:", ""] + page_table(d)
    lines += ["", "# the smoothed training loss curves (report.json's loss_curve):", ""]
    lines += curve_table(d)
    pre = logs["A"].split("\nbench: run ", 1)[0].splitlines()
    lines += ["", "# run A's first lines (A.log: the model's size, the steps left out as warm-up)",
              ""] + pre
    for x, _ in SWEEPS:
        lines += ["", f"# run {x}: the summaries bench printed ({x}.log; with --repeat, the "
                  "median run's rows)", ""] + run_blocks(logs[x])
    return lines, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="1gbit", choices=["1gbit", "10gbit"])
    ap.add_argument("--momentum", action="store_true",
                    help="SGD with momentum 0.9 and lr 0.02 (the page's first version), "
                         "not plain SGD with lr 0.2")
    ap.add_argument("--host-cpus", default="none",
                    help="comma-separated caps per host, 'none' for no cap (e.g. none,0.5)")
    ap.add_argument("--batch", default="180", help="comma-separated, per rank (e.g. 180,360)")
    ap.add_argument("--sittings", type=int, default=1)
    ap.add_argument("--quick", action="store_true",
                    help="20 steps, --repeat 1: a check of the script, not a result")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/bench/bench"))
    ap.add_argument("--output", help="the results file (default: docs/results/stragglers/"
                                     "<date>-stragglers-<variant>.txt)")
    ap.add_argument("--charts", help="copy the first sitting's " + ", ".join(CHARTS) +
                                     " there (the page's: docs/stragglers)")
    ap.add_argument("--work", help="run in this new folder and keep it (default: a temporary "
                                   "folder, removed when the file is written)")
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stragglers.py: needs root (bench --hosts makes network namespaces)")
    caps = a.host_cpus.split(",")
    batches = [int(b) for b in a.batch.split(",")]
    steps, repeat = (20, 1) if a.quick else (300, 3)
    bench = os.path.abspath(a.bench)
    cmd = "docs/results/stragglers/stragglers.py" + "".join(" " + shlex.quote(x)
                                                           for x in sys.argv[1:])
    head = results_header.lines(cmd, bench, a.allow_dirty)
    variant = [a.link] + (["momentum"] if a.momentum else []) + \
        (["host-cpus"] if caps != ["none"] else []) + \
        (["batch-" + "-".join(map(str, batches))] if batches != [180] else []) + \
        (["quick"] if a.quick else [])
    out = os.path.abspath(a.output) if a.output else os.path.join(
        ROOT, "docs/results/stragglers", head[3].split(": ", 1)[1][:10] + "-stragglers-" +
        "-".join(variant) + ".txt")
    if a.work:
        os.makedirs(a.work)
        work = os.path.abspath(a.work)
    else:
        work = tempfile.mkdtemp(prefix="gs-stragglers-")
    os.chmod(work, 0o755)
    data = os.path.join(work, "digits")
    r = subprocess.run([PY, os.path.join(ROOT, "tools/digits_idx.py"), data, "--seed", "0"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"stragglers.py: tools/digits_idx.py failed, exit {r.returncode}:\n"
                 f"{r.stderr[-1500:]}")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    configs = [(b, c) for b in batches for c in caps]
    text = head + [
        "# docs/stragglers.md's experiment for teachers: rank 3 of 4 emulated hosts computes 3x as",
        "# long (--slow 3:3); six ways to synchronize, by samples/s and by the time to one target",
        "# loss (1.10 x the ring's final smoothed loss, from sweep A). "
        f"{a.sittings} sitting(s), one after the other,",
        "# each running every configuration (--batch, --host-cpus) in this order: " +
        ", ".join(f"batch {b} {'no cap' if c == 'none' else '--host-cpus ' + c}"
                  for b, c in configs) + ".",
        f"# digits: {PY} tools/digits_idx.py digits --seed 0; OPENBLAS_NUM_THREADS=1."
        + (" --quick: 20 steps, --repeat 1, not a result." if a.quick else ""),
    ]
    total, first = 0.0, None
    for s in range(1, a.sittings + 1):
        for b, c in configs:
            label = f"sitting {s}, {a.link}, batch {b}, " + \
                ("no cap" if c == "none" else f"--host-cpus {c}") + \
                (", momentum 0.9" if a.momentum else "")
            d = os.path.join(work, f"s{s}-b{b}-cap{c}")
            com = common(a.link, c, b, a.momentum, steps, repeat, "../digits")
            lines, secs = sitting(bench, d, label, com, env)
            total += secs
            text += ["", ""] + lines
            first = first or d
    os.makedirs(os.path.dirname(out), exist_ok=True)
    results_header.write(out, "\n".join(text) + "\n")
    for ch in CHARTS if a.charts else []:
        shutil.copyfile(os.path.join(first, "CMP", ch), os.path.join(a.charts, ch))
    if not a.work:
        shutil.rmtree(work)
    print(f"stragglers.py: wrote {out} ({total:.0f} s of runs)"
          + (f"; charts in {a.charts}" if a.charts else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
