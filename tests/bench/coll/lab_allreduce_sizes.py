#!/usr/bin/python3
"""lab_allreduce_sizes.py BENCH: docs/labs/allreduce-sizes.md's command, short
(tools/lab.py allreduce-sizes --size smoke: sizes of 4, 16 and 64 KiB at 2
and 3 processes): it ends well, prints a progress line per bench run, and
its table has a row per size and process count, gradsync's time, algbw and
busbw positive, busbw = algbw x 2(n-1)/n, and Gloo's beside them where
/usr/bin/python3 has PyTorch (empty where not, with a note saying so);
its chart, table.md and report.html exist."""
import importlib.util

from gstest import check, finish, lab, lab_shape

COLS = ["size (MiB)", "processes", "gradsync time (ms)", "gradsync algbw (GB/s)",
        "gradsync busbw (GB/s)", "Gloo time (ms)", "Gloo busbw (GB/s)"]
torch = importlib.util.find_spec("torch") is not None
r, d, head, rows = lab("allreduce-sizes")
lab_shape("allreduce-sizes", r, d, head, rows, COLS, 6, COLS[:5] + (COLS[5:] if torch else []))
check(sorted((float(x[0]), int(x[1])) for x in rows) ==
      sorted((s / 1024, n) for s in (4, 16, 64) for n in (2, 3)),
      f"allreduce-sizes: the rows' sizes and processes: {[(x[0], x[1]) for x in rows]}")
for x in rows:
    n, algbw, busbw = int(x[1]), float(x[3] or 0), float(x[4] or 0)
    check(abs(busbw - algbw * 2 * (n - 1) / n) <= 1e-3 * busbw + 1e-6,
          f"allreduce-sizes: busbw {busbw} is not algbw {algbw} x 2(n-1)/n at n = {n}")
    if not torch:
        check(x[5] == "" and x[6] == "", f"allreduce-sizes: Gloo figures without PyTorch: {x}")
if not torch:
    check("Gloo: not measured" in r.stdout, "allreduce-sizes: no note that Gloo did not run")
finish("lab_allreduce_sizes")
