#!/usr/bin/python3
"""peers_hosts.py: docs/hosts.md's comparison of the ring with PyTorch's
Gloo and Open MPI over the same emulated links, as users run each tool:

  bench --mode ring --collective allreduce --hosts H --link 1gbit -b 16M -e 64M -f 4 -n 5 -w 2
  bench --hosts H --link 1gbit -- python3 bench/peers/gloo_allreduce.py (same sizes)
  bench --hosts H --link 1gbit -- bench/peers/mpi_hosts.sh D ./mpi_allreduce (same sizes)

H = 2, then 4; the three tools one after the other, REPS times (interleaved,
so that a slow minute of the machine falls on all three); every run's
out-of-place time, then the medians as busbw (size / time x 2(H-1)/H) and
each peer's share of the link. Writes docs/results/peers-hosts/<date>-peers-
hosts-1gbit.txt, its first lines from tools/results_header.py (a clean
commit, bench built from it).

  docs/results/peers-hosts/peers_hosts.py [--reps 3] [--hosts 2,4] [--allow-dirty]

Needs root (emulated hosts), mpicc/mpirun (openmpi-bin, libopenmpi-dev) and
PyTorch for /usr/bin/python3 (python3-torch); each tool checks its sums."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import results_header  # noqa: E402

SIZES = "-b 16M -e 64M -f 4 -n 5 -w 2".split()
LINK_GBPS = 0.125  # 1 Gbit/s each way, GB/s
PY = "/usr/bin/python3"


def commands(bench, hosts, mpi_exe, d):
    """(tool, argv, the time's column); D: a folder every host's rank can use"""
    common = [bench, "--hosts", str(hosts), "--link", "1gbit"]
    return [("ring", [bench, "--mode", "ring", "--collective", "allreduce", "--hosts", str(hosts),
                      "--link", "1gbit", "--out", os.path.join(d, "ring")] + SIZES, 5),
            ("gloo", common + ["--", PY, os.path.join(ROOT, "bench/peers/gloo_allreduce.py")] + SIZES,
             4),
            ("mpi", common + ["--", os.path.join(ROOT, "bench/peers/mpi_hosts.sh"), d, mpi_exe] + SIZES,
             4)]


def times(out, col):
    """{size: out-of-place time in us} from a table row per size"""
    got = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) > col and f[0].isdigit() and f[1].isdigit():
            got[int(f[0])] = float(f[col])
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hosts", default="2,4")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/bench/bench"))
    ap.add_argument("--allow-dirty", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("peers_hosts.py: needs root (bench --hosts makes network namespaces)")
    hosts = [int(h) for h in a.hosts.split(",")]
    cmd = "docs/results/peers-hosts/peers_hosts.py" + "".join(" " + x for x in sys.argv[1:])
    head = results_header.lines(cmd, a.bench, a.allow_dirty)
    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="gs-peers-hosts-")
    os.chmod(tmp, 0o755)
    mpi_exe = os.path.join(tmp, "mpi_allreduce")
    subprocess.run(["mpicc", "-O2", "-o", mpi_exe, os.path.join(ROOT, "bench/peers/mpi_allreduce.c")],
                   check=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    runs, every = {}, []
    for h in hosts:
        for rep in range(a.reps):
            d = tempfile.mkdtemp(dir=tmp)
            os.chmod(d, 0o755)  # every host's rank reads and writes it
            for tool, argv, col in commands(a.bench, h, mpi_exe, d):
                r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
                t = times(r.stdout, col)
                if r.returncode != 0 or not t:
                    sys.exit(f"peers_hosts.py: {tool} on {h} hosts (repetition {rep + 1}) failed, exit "
                             f"{r.returncode}:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
                print(f"{tool} {h} hosts, repetition {rep + 1}: " +
                      ", ".join(f"{s} B {us:.0f} us" for s, us in sorted(t.items())), file=sys.stderr)
                for s, us in sorted(t.items()):
                    runs.setdefault((tool, h, s), []).append(us)
                    every.append(f"{tool} {h} {s} {us:.2f}")
    text = head + [
        "# load average before, after: %.2f %.2f %.2f, %.2f %.2f %.2f" % (load_before + os.getloadavg()),
        "# emulated hosts: bench --hosts H --link 1gbit (tbf, 0.125 GB/s each way), one rank per host",
        f"# {a.reps} interleaved repetitions per H of (ring, Gloo, Open MPI), as users run each:",
    ] + ["#   " + " ".join(os.path.relpath(x, ROOT) if x.startswith(ROOT) else x for x in argv)
         for _, argv, _ in commands("bench", "H", "./mpi_allreduce", "D")] + [
        "", "every run, in order: tool hosts size_bytes out-of-place_time_us"] + every + [
        "", "medians: busbw = size / time x 2(H-1)/H, GB/s (share of the link)",
        "| hosts | size | ring | Gloo | Open MPI | ring / Gloo | ring / Open MPI |",
        "|---|---|---|---|---|---|---|"]
    for h in hosts:
        for s in sorted({k[2] for k in runs if k[1] == h}):
            bw = {t: s / statistics.median(runs[(t, h, s)]) * 1e6 / 1e9 * 2 * (h - 1) / h
                  for t in ("ring", "gloo", "mpi")}
            cell = {t: f"{bw[t]:.3f} ({100 * bw[t] / LINK_GBPS:.0f}%)" for t in bw}
            text.append(f"| {h} | {s >> 20} MiB | {cell['ring']} | {cell['gloo']} | {cell['mpi']} | "
                        f"{bw['ring'] / bw['gloo']:.2f} | {bw['ring'] / bw['mpi']:.2f} |")
    out = os.path.join(ROOT, "docs/results/peers-hosts",
                       head[3].split(": ", 1)[1][:10] + "-peers-hosts-1gbit.txt")
    results_header.write(out, "\n".join(text) + "\n")
    print("peers_hosts.py: wrote " + os.path.relpath(out, ROOT))


if __name__ == "__main__":
    main()
