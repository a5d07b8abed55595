#!/usr/bin/python3
"""compare.py DIR: the tables bench/peers/run.sh wrote, side by side.

For each world size and message size: busbw (GB/s) of gradsync's ring over
TCP, Gloo, Open MPI over TCP and over shared memory (best over the rounds,
then the median in brackets when there are several rounds), the ring's
ratio to the better of Gloo and Open MPI-over-TCP (best to best, and
median to median: on a shared machine the median is the steadier), and
whether the ring reaches 1.3x from 1 MiB to 256 MiB and an 8-byte time no
worse than Open MPI-over-TCP's. Any wrong element in any table is reported.
"""
import glob
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
        try:
            size, t, busbw, wrong = int(f[0]), float(f[4]), float(f[6]), f[7]
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
        m = re.match(r"(ring|gloo|mpi-tcp|mpi-shm)-(\d+)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        key = (m.group(1), int(m.group(2)))
        for size, row in load(path).items():
            data.setdefault(key, {}).setdefault(size, []).append(row)
    worlds = sorted({n for _, n in data})
    fails, wrongs = [], []
    for N in worlds:
        sizes = sorted({s for (tool, n), v in data.items() if n == N for s in v})
        print(f"\n## {N} ranks: busbw in GB/s (1e9 B/s), best of rounds [median]; "
              f"busbw = size/time x 2(N-1)/N; time in us for 8 B")
        head = f"{'size':>6} " + " ".join(f"{label:>17}" for _, label in TOOLS)
        print(head + "  ring / better of Gloo, MPI-TCP: best [median]")
        for s in sizes:
            cells, best = [], {}
            for tool, _ in TOOLS:
                rows = data.get((tool, N), {}).get(s, [])
                if not rows:
                    cells.append(f"{'-':>17}")
                    continue
                for r in rows:
                    if r[2] not in ("0", "N/A"):
                        wrongs.append(f"{tool} {N} ranks {s} B: {r[2]} wrong elements")
                bws = [r[1] for r in rows]
                ts = [r[0] for r in rows]
                best[tool] = (max(bws), min(ts), statistics.median(bws))
                if s <= 64:
                    txt = f"{min(ts):.1f}us"
                    if len(ts) > 1:
                        txt += f" [{statistics.median(ts):.1f}]"
                else:
                    txt = f"{max(bws):.3f}"
                    if len(bws) > 1:
                        txt += f" [{statistics.median(bws):.3f}]"
                cells.append(f"{txt:>17}")
            ratio = ""
            peers = [best[t][0] for t in ("gloo", "mpi-tcp") if t in best]
            peers_med = [best[t][2] for t in ("gloo", "mpi-tcp") if t in best]
            if "ring" in best and peers and max(peers) > 0 and s > 64:
                q = best["ring"][0] / max(peers)
                qm = best["ring"][2] / max(peers_med) if max(peers_med) > 0 else 0
                ok = q >= 1.3
                ratio = f"{q:.2f}x [{qm:.2f}x]" + ("" if ok or s < (1 << 20) else "  < 1.3")
                if s >= (1 << 20) and not ok:
                    fails.append(f"{N} ranks, {human(s)}: ring {q:.2f}x the better peer")
            if s == 8 and "ring" in best and "mpi-tcp" in best:
                ok = best["ring"][1] <= best["mpi-tcp"][1]
                ratio = (f"8 B: ring {best['ring'][1]:.1f} us vs MPI/TCP "
                         f"{best['mpi-tcp'][1]:.1f} us" + ("" if ok else "  GOAL MISSED"))
                if not ok:
                    fails.append(f"{N} ranks, 8 B: ring {best['ring'][1]:.1f} us > Open MPI "
                                 f"{best['mpi-tcp'][1]:.1f} us")
            print(f"{human(s):>6} " + " ".join(cells) + f"  {ratio}")
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
