#!/usr/bin/python3
"""compare.py DIR: the tables bench/peers/run_peers.sh wrote, side by side.

For each world size and message size: the median over the rounds of busbw
(GB/s) of gradsync as `bench --collective allreduce` runs by default (on
one host: shared memory), of its socket algorithms alone (GS_SHM=0: rd, then
the ring), Gloo, Open MPI over TCP and over shared memory. Ratios: gradsync
to the better of Gloo and Open MPI-over-TCP (the goal: 1.3x from 1 MiB up),
to Open MPI over shared memory, and the sockets' to the better TCP peer.
Goals also: no slower than Gloo at any size, and an 8-byte time within
1.2 x rounds x one ZeroMQ round trip (floor.txt), rounds being 1 for shared
memory (one barrier) and log2 N for the sockets' recursive doubling. Any
wrong element in any table is reported.
"""
import glob
import math
import os
import re
import statistics
import sys

TOOLS = [("shm", "gradsync"), ("ring", "gs-sockets"), ("gloo", "Gloo"), ("mpi-tcp", "MPI/TCP"),
         ("mpi-shm", "MPI/shm")]
OURS = (("shm", "gradsync", lambda N: 1), ("ring", "gs-sockets", lambda N: max(1, math.ceil(math.log2(N)))))


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
        m = re.match(r"(shm|ring|gloo|mpi-tcp|mpi-shm)-(\d+)-(\d+)\.txt$", os.path.basename(path))
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
        print(head + "  gradsync / better TCP peer, / MPI-shm; gs-sockets / better TCP peer")
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
            notes = []
            peers = [med[t][0] for t in ("gloo", "mpi-tcp") if t in med]
            for tool, label, rounds_of in OURS:
                if tool not in med:
                    continue
                if s > 64 and peers and max(peers) > 0:
                    q = med[tool][0] / max(peers)
                    notes.append(f"{label} {q:.2f}x")
                    if tool == "shm" and "mpi-shm" in med and med["mpi-shm"][0] > 0:
                        notes[-1] += f", {med[tool][0] / med['mpi-shm'][0]:.2f}x"
                    if tool == "shm" and s >= (1 << 20) and q < 1.3:
                        notes[-1] += " < 1.3"
                        fails.append(f"{N} ranks, {human(s)}: {label} {q:.2f}x the better peer")
                if "gloo" in med and med[tool][1] > med["gloo"][1]:
                    notes.append(f"{label} slower than Gloo")
                    fails.append(f"{N} ranks, {human(s)}: {label} slower than Gloo")
                if s == 8 and rtt:
                    k = rounds_of(N)
                    goal = 1.2 * k * rtt
                    notes.append(f"{label} 8 B {med[tool][1]:.1f} us, goal <= {goal:.1f} (1.2 x "
                                 f"{k} x {rtt:.1f})")
                    if med[tool][1] > goal:
                        fails.append(f"{N} ranks, 8 B: {label} {med[tool][1]:.1f} us > "
                                     f"{goal:.1f} us")
            note = "; ".join(notes)
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
