#!/usr/bin/python3
"""lab_straggler.py BENCH: docs/labs/straggler.md's command, short
(tools/lab.py straggler --size smoke: 4 ranks on loopback, rank 3 three
times as slow, 30 steps of the digits): it ends well, prints a progress
line per bench run, and its table has ps bsp, ring, ps ssp:2 and ps async,
each with positive samples/s and samples/s against ps bsp (1 for bsp),
staleness 0 for the synchronous ones, at most 2 for ssp:2; its chart
(loss against time), table.md and report.html exist."""
from gstest import check, finish, lab, lab_shape

COLS = ["mode", "samples/s", "vs ps bsp", "staleness mean", "staleness max",
        "time to target (s)", "held-out accuracy (%)"]
r, d, head, rows = lab("straggler")
lab_shape("straggler", r, d, head, rows, COLS, 4, ["samples/s", "vs ps bsp"],
          maybe=["time to target (s)", "held-out accuracy (%)"])
if len(rows) == 4 and head == COLS:
    modes = [x[0] for x in rows]
    check(sorted(modes) == ["ps async", "ps bsp", "ps ssp:2", "ring"], f"straggler: {modes}")
    for x in rows:
        smax = float(x[4])
        if x[0] in ("ps bsp", "ring"):
            check(smax == 0, f"straggler: {x[0]} with staleness {smax}")
        if x[0] == "ps bsp":
            check(float(x[2]) == 1, f"straggler: ps bsp is {x[2]} of itself")
        if x[0] == "ps ssp:2":
            check(smax <= 2, f"straggler: ssp:2 applied a gradient {smax} updates stale")
finish("lab_straggler")
