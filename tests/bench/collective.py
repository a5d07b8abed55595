#!/usr/bin/python3
"""collective.py: `bench --collective allreduce` as nccl-tests users read it.

For ring and ps (world 2 and 3): one table row per size from -b to -e by
-f, numbers in every column, busbw = algbw x 2(N-1)/N, zero wrong values
(every iteration checked against the exact sum), and --json writes the same
rows machine-readably.

    collective.py BENCH"""
import json
import os
import re

from common import check, finish, run, tmpdir

for mode, world in (("ring", 2), ("ring", 3), ("ps", 2), ("ps", 3)):
    d = tmpdir()
    r = run(["--mode", mode, "--world", str(world), "--collective", "allreduce", "-b", "8",
             "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "--json", "--timeout", "20",
             "--threads", "1", "--out", d])
    if not check(r.returncode == 0, f"{mode} w{world}: exit {r.returncode}: {r.stderr}"):
        continue
    check("busbw = algbw x 2(n-1)/n" in r.stdout.lower(), f"{mode}: no formula beside the table")
    # the ring names its algorithm per size in a last column (algo.py checks it)
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+float\s+sum\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)"
                      r"(?:\s+(?:ring|rd|direct))?$", r.stdout, re.M)
    sizes = [int(x[0]) for x in rows]
    check(sizes == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288],
          f"{mode} w{world}: sizes {sizes}")
    for size, count, t, alg, bus, wrong in rows:
        check(int(count) * 4 == int(size), "count x 4 != size")
        check(float(t) > 0, "time not positive")
        check(int(wrong) == 0, f"{mode} w{world} size {size}: {wrong} wrong")
        a, b = float(alg), float(bus)
        exp_alg = int(size) / (float(t) * 1e-6) / 1e9
        check(abs(a - exp_alg) <= 0.0011 + 0.01 * exp_alg, f"algbw {a} != size/time {exp_alg}")
        check(abs(b - a * 2 * (world - 1) / world) <= 0.0011 + 0.01 * b, f"busbw {b} vs algbw {a}")
    path = os.path.join(d, f"collective-{mode}-w{world}.json")
    try:
        j = json.load(open(path))
        check(j["world"] == world and j["mode"] == mode and len(j["rows"]) == len(rows),
              f"{path}: {j.get('world')} {j.get('mode')} {len(j.get('rows', []))} rows")
        check(all(isinstance(x["busbw_gbps"], float) and x["wrong"] == 0 for x in j["rows"]),
              f"{path}: rows")
    except (OSError, ValueError, KeyError) as e:
        check(False, f"{path}: {e}")

finish("collective")
