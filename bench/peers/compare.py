#!/usr/bin/python3
"""compare.py DIR: the tables bench/peers/run_peers.sh wrote, side by side.

For each world size and message size: the median over the rounds of busbw
(GB/s) of gradsync as `bench --collective allreduce` runs by default (on
one host: shared memory), of its socket algorithms alone (GS_SHM=0: rd, then
the ring), Gloo, Open MPI over TCP and over shared memory. Ratios: gradsync
to the best of the three peers, and the sockets' to the better TCP peer
(Gloo, Open MPI over TCP).

The goals checked are issue 48's: an 8-byte all-reduce over the sockets
within 2x Open MPI over TCP, and by default (shared memory) within 1.5x
Open MPI over shared memory; gradsync's busbw at least 1.3x the best peer's
above 64 KiB, and not below it at any size. Any wrong element in any table
is reported.
"""
import glob
import math
import os
import re
import statistics
import sys

TOOLS = [("shm", "gradsync"), ("ring", "gs-sockets"), ("gloo", "Gloo"), ("mpi-tcp", "MPI/TCP"),
         ("mpi-shm", "MPI/shm")]
PEERS = ("gloo", "mpi-tcp", "mpi-shm")
TCP_PEERS = ("gloo", "mpi-tcp")
BUSBW_GOAL, BUSBW_FROM = 1.3, 64 << 10   # x the best peer, above this many bytes
# 8 bytes: (ours, its peer, at most this many times the peer's time)
LATENCY_GOALS = (("ring", "mpi-tcp", 2.0), ("shm", "mpi-shm", 1.5))


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
    worlds = sorted({n for _, n in data})
    fails, wrongs = [], []
    for N in worlds:
        sizes = sorted({s for (tool, n), v in data.items() if n == N for s in v})
        rounds = max(len(v) for (tool, n), byte in data.items() if n == N for v in byte.values())
        print(f"\n## {N} ranks: median of {rounds} round(s); busbw in GB/s (1e9 B/s) = "
              f"size/time x 2(N-1)/N; time in us up to 64 B")
        head = f"{'size':>6} " + " ".join(f"{label:>10}" for _, label in TOOLS)
        print(head + "  gradsync / best peer; gs-sockets / better TCP peer")
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
            label = dict(TOOLS)
            best = [t for t in PEERS if t in med]
            if "shm" in med and best:
                # busbw from 128 B, time below: the better of two is the higher and the lower
                if s > 64:
                    top = max(best, key=lambda t: med[t][0])
                    q = med["shm"][0] / med[top][0] if med[top][0] > 0 else math.inf
                else:
                    top = min(best, key=lambda t: med[t][1])
                    q = med[top][1] / med["shm"][1] if med["shm"][1] > 0 else math.inf
                notes.append(f"gradsync {q:.2f}x {label[top]}")
                if s > BUSBW_FROM and q < BUSBW_GOAL:
                    fails.append(f"{N} ranks, {human(s)}: gradsync {q:.2f}x {label[top]}, "
                                 f"goal {BUSBW_GOAL}x")
                elif q < 1:
                    fails.append(f"{N} ranks, {human(s)}: gradsync below {label[top]} "
                                 f"({q:.2f}x)")
            tcp = [t for t in TCP_PEERS if t in med]
            if "ring" in med and tcp and s > 64:
                top = max(tcp, key=lambda t: med[t][0])
                if med[top][0] > 0:
                    notes.append(f"gs-sockets {med['ring'][0] / med[top][0]:.2f}x {label[top]}")
            for ours, peer, most in LATENCY_GOALS if s == 8 else ():
                if ours in med and peer in med and med[peer][1] > 0:
                    k = med[ours][1] / med[peer][1]
                    notes.append(f"{label[ours]} {k:.2f}x {label[peer]}'s time (goal <= {most}x)")
                    if k > most:
                        fails.append(f"{N} ranks, 8 B: {label[ours]} {med[ours][1]:.1f} us, "
                                     f"{k:.2f}x {label[peer]}'s {med[peer][1]:.1f} us, goal "
                                     f"<= {most}x")
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
