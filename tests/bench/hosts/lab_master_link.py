#!/usr/bin/python3
"""lab_master_link.py BENCH: docs/labs/master-link.md's command, short
(tools/lab.py master-link --size smoke: ps and ring at 2 and 3 emulated
hosts, 8 steps; root, else skipped): it ends well, prints a progress line,
and its table has ps then ring at 2 and 3 ranks, each with a positive
step, host 0's and host 1's bytes sent and link busy shares; under ps host
0 sends (N-1) times what host 1 sends, under the ring about the same; its
chart, table.md and report.html exist."""
from gstest import check, finish, lab, lab_shape, need_root

need_root()
COLS = ["mode", "ranks (hosts)", "step (ms, median)", "cost model's step (ms)",
        "host 0 sent (MiB/step)", "host 1 sent (MiB/step)", "host 0's link busy (%)",
        "host 1's link busy (%)"]
r, d, head, rows = lab("master-link")
lab_shape("master-link", r, d, head, rows, COLS, 4, COLS[2:])
if len(rows) == 4 and head == COLS:
    check([(x[0], int(x[1])) for x in rows] == [("ps", 2), ("ps", 3), ("ring", 2), ("ring", 3)],
          f"master-link: rows {[(x[0], x[1]) for x in rows]}")
    for x in rows:
        n, h0, h1 = int(x[1]), float(x[4]), float(x[5])
        want = n - 1 if x[0] == "ps" else 1
        check(abs(h0 / h1 / want - 1) < 0.15,
              f"master-link {x[0]} at {n}: host 0 sent {h0}, host 1 {h1}: not {want}x")
finish("lab_master_link")
