#!/usr/bin/python3
"""lab_ddp_variants.py BENCH: docs/labs/ddp-variants.md's command, short
(tools/lab.py ddp-variants --size smoke: resnet50's gradient shapes, 5 ms
of emulated compute, 3 steps a run, on loopback): it ends well, prints a
progress line per bench run, and its table has the seven variants in order
(naive, flat, per-parameter overlap, buckets of 1, 10, 100, 1000 MiB),
each with its plan's buckets (161 per parameter, one for flat and for 100
and 1000 MiB, 35 and 9 for 1 and 10 MiB) and a positive step, exposed
communication and time after backward; under it the fit's per-bucket
overhead and predicted best size (or a line saying no fit holds) and the
measured best, by the time after backward and by the step; its chart,
table.md and report.html exist."""
import re

from gstest import check, finish, lab, lab_shape

COLS = ["variant", "--bucket-mb", "buckets", "all-reduce", "step (ms, median)",
        "exposed communication (ms)", "after backward (ms)", "cost model's step (ms)"]
r, d, head, rows = lab("ddp-variants")
lab_shape("ddp-variants", r, d, head, rows, COLS, 7, ["buckets", "step (ms, median)"],
          maybe=["exposed communication (ms)", "after backward (ms)", "cost model's step (ms)"])
want = [("naive: one all-reduce per parameter", 161, "after backward"),
        ("flat: one bucket", 1, "after backward"),
        ("overlap: one all-reduce per parameter", 161, "during backward"),
        ("bucketed: 1 MiB", 35, "during backward"), ("bucketed: 10 MiB", 9, "during backward"),
        ("bucketed: 100 MiB", 1, "during backward"), ("bucketed: 1000 MiB", 1, "during backward")]
got = [(x[0], int(x[2]), x[3]) for x in rows]
check(got == want, f"ddp-variants: the variants {got}, expected {want}")
check(all(x[6] != "" for x in rows[2:]), "ddp-variants: an overlapped run without its time "
      "after backward")
fit = re.search(r"o = ([\d.e+-]+) ms per bucket.*\n.*predicted best: ([\d.e+-]+) buckets, of "
                r"([\d.e+-]+) MiB each", r.stdout)
check((fit and all(float(v) > 0 for v in fit.groups())) or
      "fit: no positive per-bucket cost" in r.stdout,
      f"ddp-variants: neither a fit nor a line saying none holds: {r.stdout[-800:]}")
for what in ("time after backward", "step"):
    check(re.search(rf"measured best of the overlapped runs by the {what}: (a bucket per "
                    r"parameter|[\d.]+ MiB) \(\d+ buckets?, [\d.]+ ms\)", r.stdout),
          f"ddp-variants: no measured best by the {what}")
finish("lab_ddp_variants")
