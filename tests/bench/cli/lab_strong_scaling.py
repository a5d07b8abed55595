#!/usr/bin/python3
"""lab_strong_scaling.py BENCH: docs/labs/strong-scaling.md's command, short
(tools/lab.py strong-scaling --size smoke: two small MLPs at ranks 1, 2 and
4, global batch 64, 4 steps): it ends well, prints a progress line, and its
table has a row per model and rank count with the global batch fixed and
split over the ranks (64, 32, 16 per rank: bench's --strong), a positive
step, speed-up 1 at one rank, and efficiency = speed-up / ranks; its
chart, table.md and report.html exist."""
from gstest import check, finish, lab, lab_shape

COLS = ["model", "ranks", "global batch", "batch per rank", "step (ms, median)", "speed-up",
        "efficiency"]
r, d, head, rows = lab("strong-scaling")
lab_shape("strong-scaling", r, d, head, rows, COLS, 6, COLS[1:])
if len(rows) == 6 and head == COLS:
    for x in rows:
        n, gb, b, sp, eff = int(x[1]), int(x[2]), int(x[3]), float(x[5]), float(x[6])
        check(gb == 64 and b * n == gb, f"strong-scaling: {x}: global batch not 64 split {n} ways")
        check(abs(eff - sp / n) <= 1e-3 * sp, f"strong-scaling: {x}: efficiency != speed-up / N")
        if n == 1:
            check(sp == 1, f"strong-scaling: speed-up {sp} at one rank")
    check(sorted({x[0] for x in rows}) == ["mlp:784-256-256-10", "mlp:784-32-10"] and
          sorted(int(x[1]) for x in rows) == [1, 1, 2, 2, 4, 4], f"strong-scaling: rows {rows}")
finish("lab_strong_scaling")
