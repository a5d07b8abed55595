#!/usr/bin/python3
"""compare.py DIR: the tables bench/peers/run.sh wrote, side by side.

For each world size and message size: the median over the rounds of busbw
(GB/s) of gradsync's ring (`bench --collective allreduce`), Gloo, Open MPI
over TCP and over shared memory; the ring's ratio to the better of Gloo and
Open MPI-over-TCP; and the goals: 1.3x that from 1 MiB up, no slower than
Gloo at any size, and an 8-byte time within 1.2x the rounds of the ring's
small-message algorithm (log2 N, recursive doubling) times one ZeroMQ round
trip (floor.txt). Any wrong element in any table is reported.
"""
import glob
import math
import os
import re
import statistics
import sys

TOOLS = [("ring", "ring/TCP"), ("gloo", "Gloo"), ("mpi-tcp", "MPI/TCP"), ("mpi-shm", "MPI/shm")]


def load(path):
    rows = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        # bench prints a root column, both placements and the algorithm
        o = 1 if len(f) >= 13 else 0
        try:
            size, t, busbw, wrong = int(f[0]), float(f[4 + o]), float(f[6 + o]), f[7 + o]
        except (ValueError, IndexError):
            continue
        rows[size] = (t, busbw, wrong)
    return rows


def human(n):
    for unit, k in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k}{unit}"
    return str(n)


def floor_rtt(d):
    """one ZeroMQ round trip (us), from floor.txt's polling receive"""
    try:
        for line in open(os.path.join(d, "floor.txt")):
            if "ZeroMQ tcp, polling receive" in line:
                return 2 * float(line.split()[-1])
    except OSError:
        pass
    return None


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "results/peers"
    data = {}  # (tool, N) -> size -> [(t, busbw, wrong)]
    for path in glob.glob(os.path.join(d, "*.txt")):
        m = re.match(r"(ring|gloo|mpi-tcp|mpi-shm)-(\d+)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        key = (m.group(1), int(m.group(2)))
        for size, row in load(path).items():
            data.setdefault(key, {}).setdefault(size, []).append(row)
    rtt = floor_rtt(d)
    worlds = sorted({n for _, n in data})
    fails, wrongs = [], []
    for N in worlds:
        sizes = sorted({s for (tool, n), v in data.items() if n == N for s in v})
        rounds = max(len(v) for (tool, n), byte in data.items() if n == N for v in byte.values())
        print(f"\n## {N} ranks: median of {rounds} round(s); busbw in GB/s (1e9 B/s) = "
              f"size/time x 2(N-1)/N; time in us up to 64 B")
        head = f"{'size':>6} " + " ".join(f"{label:>10}" for _, label in TOOLS)
        print(head + "  ring / better of Gloo, MPI-TCP")
        for s in sizes:
            cells, med = [], {}
            for tool, _ in TOOLS:
                rows = data.get((tool, N), {}).get(s, [])
                if not rows:
                    cells.append(f"{'-':>10}")
                    continue
                for r in rows:
                    if r[2] not in ("0", "N/A"):
                        wrongs.append(f"{tool} {N} ranks {s} B: {r[2]} wrong elements")
                med[tool] = (statistics.median(r[1] for r in rows),
                             statistics.median(r[0] for r in rows))
                txt = f"{med[tool][1]:.1f}us" if s <= 64 else f"{med[tool][0]:.3f}"
                cells.append(f"{txt:>10}")
            note = ""
            peers = [med[t][0] for t in ("gloo", "mpi-tcp") if t in med]
            if "ring" in med and s > 64 and peers and max(peers) > 0:
                q = med["ring"][0] / max(peers)
                note = f"{q:.2f}x"
                if s >= (1 << 20) and q < 1.3:
                    note += "  < 1.3"
                    fails.append(f"{N} ranks, {human(s)}: ring {q:.2f}x the better peer")
            if "ring" in med and "gloo" in med and med["ring"][1] > med["gloo"][1]:
                note += "  slower than Gloo"
                fails.append(f"{N} ranks, {human(s)}: ring slower than Gloo")
            if s == 8 and "ring" in med and rtt:
                goal = 1.2 * max(1, math.ceil(math.log2(N))) * rtt
                ok = med["ring"][1] <= goal
                note += (f"  8 B: {med['ring'][1]:.1f} us, goal <= {goal:.1f} (1.2 x "
                         f"{max(1, math.ceil(math.log2(N)))} round(s) x {rtt:.1f} us)")
                if not ok:
                    fails.append(f"{N} ranks, 8 B: ring {med['ring'][1]:.1f} us > {goal:.1f} us")
            print(f"{human(s):>6} " + " ".join(cells) + f"  {note}")
    print()
    for w in wrongs:
        print("WRONG:", w)
    if fails:
        print("Goals missed:")
        for f in fails:
            print("  " + f)
    else:
        print("Goals met on every size measured.")


if __name__ == "__main__":
    main()
