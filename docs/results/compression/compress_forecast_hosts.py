#!/usr/bin/python3
"""compress_forecast_hosts.py: docs/compression.md's example of the cost
model's word before a run ("Should it pay?"): PowerSGD at rank 2 in the ring
on 4 emulated hosts at 100 Mbit/s with the ResNet-50 profile, where the
plain ring's step is its link. bench prints the forecast (this machine
measured first) before the run and the measured median step beside it
after; the doc quotes those lines and the run's "vs model" column, so the
file keeps bench's whole output. One run, as the doc shows one:

    bench --mode ring --world 4 --hosts 4 --link 100mbit --model resnet50 --compute-ms 50 \\
          --compress powersgd:2 --powersgd-start 0 --steps 4 --warmup 1 --repeat 1 --threads 1 \\
          --timeout 120

with OPENBLAS_NUM_THREADS=1, from the repository's root, as root (emulated
hosts). Writes docs/results/compression/<date>-compress-forecast-hosts-
100mbit.txt: tools/results_header.py's lines (a clean commit, bench built
from it, else refused), then bench's stdout and stderr. About a minute on 2
cores.

    docs/results/compression/compress_forecast_hosts.py [--bench B] [--out DIR]
        [--results FILE] [--quick] [--allow-dirty]

--quick: mlp:784-256-10 in place of resnet50, 2 steps (seconds), to try the
script; its file goes to the temporary folder unless --results says."""
import os
import time

import compress_lib as lib

SCRIPT = "compress_forecast_hosts.py"
NAME = "compress-forecast-hosts-100mbit"
FLAGS = ["--mode", "ring", "--world", "4", "--hosts", "4", "--link", "100mbit", "--model", "resnet50",
         "--compute-ms", "50", "--compress", "powersgd:2", "--powersgd-start", "0", "--steps", "4",
         "--warmup", "1", "--repeat", "1", "--threads", "1", "--timeout", "120"]


def flags(quick):
    """the run's flags; --quick: a small model for 2 steps"""
    f = list(FLAGS)
    if not quick:
        return f
    f[f.index("--model") + 1] = "mlp:784-256-10"
    f[f.index("--steps") + 1] = "2"
    return f


def main():
    a = lib.parse(__doc__, SCRIPT, NAME, "a small model, 2 steps: to try the script",
                  rounds=False)
    lib.need_root(SCRIPT, ["100m"])
    head = lib.header(SCRIPT, a.bench, a.allow_dirty)
    out = lib.out_dir(a.out, NAME)
    argv = [a.bench] + flags(a.quick)
    load0, t0 = os.getloadavg(), time.time()
    r = lib.run(SCRIPT, "ring world 4, 4 hosts at 100 Mbit/s, --compress powersgd:2", argv,
                os.path.join(out, "run"), 900)
    lines = head + [
        f"# one run, OPENBLAS_NUM_THREADS=1; load average {load0[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({time.time() - t0:.0f} s); bench's stdout, then its stderr:",
        "#   " + " ".join([lib.rel(a.bench)] + flags(a.quick) +
                         ["--out", lib.rel(os.path.join(out, "run"))]),
        ""] + r.stdout.rstrip("\n").splitlines() + ["", "# stderr:"] + \
        r.stderr.rstrip("\n").splitlines()
    lib.write(SCRIPT, lib.results_path(a.results, head, NAME, a.quick), lines)


if __name__ == "__main__":
    main()
