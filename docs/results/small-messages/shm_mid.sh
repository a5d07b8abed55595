#!/usr/bin/env bash
# shm_mid.sh: the shared-memory all-reduce at 2 ranks from 128 KiB to 32
# MiB (issue 48), this build against a build before a change and against
# Open MPI over shared memory (vader), in one sitting
# (docs/measurements.md, "Why, at 2 ranks"). Writes
# docs/results/small-messages/<date>-shm-mid.txt, whose first lines give
# the command, the commit, the machine and the date.
#
#   docs/results/small-messages/shm_mid.sh --base BENCH [-r ROUNDS] [--allow-dirty]
#
# Each round runs, in turn: the base build; this build with
# GS_RING_INLINE=64K (its shared-memory rounds, with the hand-off to the
# progress thread as before); this build; Open MPI. Every tool is the same
# command as bench/peers/run_peers.sh runs it (bench --collective
# allreduce, -f 4 -n 20 -w 5; mpirun --bind-to core with btl vader,self).
# The medians over ROUNDS (default 5) of busbw, out of place and in place
# (Open MPI: out of place only), then every round's figures.
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=5 base="" allow=""
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    --allow-dirty) allow=--allow-dirty; shift ;;
    *) echo "usage: $0 --base BENCH [-r ROUNDS] [--allow-dirty]" >&2; exit 2 ;;
  esac
done
[ -n "$base" ] || { echo "usage: $0 --base BENCH [-r ROUNDS] [--allow-dirty]" >&2; exit 2; }
B=${GS_BENCH:-build/bench/bench}
HDR=$(python3 tools/results_header.py --bench "$B" ${allow:+"$allow"} \
  --command "docs/results/small-messages/shm_mid.sh ${args[*]}") || exit 1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
OUT=docs/results/small-messages/$(date -u +%F)-shm-mid.txt
mpicc -O2 -o "$D/mpi_allreduce" bench/peers/mpi_allreduce.c
sizes=(-b 128K -e 32M -f 4 -n 20 -w 5)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$rounds"); do
  for tool in before split after mpi-shm; do
    case $tool in
      before) "$base" --mode ring --collective allreduce --world 2 "${sizes[@]}" --out "$D/b" ;;
      split) GS_RING_INLINE=64K "$B" --mode ring --collective allreduce --world 2 "${sizes[@]}" \
               --out "$D/b" ;;
      after) "$B" --mode ring --collective allreduce --world 2 "${sizes[@]}" --out "$D/b" ;;
      mpi-shm) mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --bind-to core -np 2 \
                 --mca btl vader,self "$D/mpi_allreduce" "${sizes[@]}" -t mpi ;;
    esac 2>/dev/null | awk -v t=$tool -v r="$r" '
      /^ +[0-9]+ / { if (t == "mpi-shm") print r, t, $1, $7, "-"; else print r, t, $1, $8, $12 }'
  done
done > "$D/all.txt"
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "$HDR"
  echo "# base: $("$base" --version 2>&1 | head -1)"
  echo "# load before: $load0; after: $load1"
  echo
  echo "## 2 ranks: busbw in GB/s (size/time x 2(N-1)/N), medians of $rounds interleaved rounds, out of place / in place"
  python3 - "$D/all.txt" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, t, s, o, i = line.split()
    d[(t, int(s))].append((float(o), None if i == "-" else float(i)))
tools = ["before", "split", "after", "mpi-shm"]
print("%9s " % "size" + " ".join("%15s" % t for t in tools) + "   after / before, / mpi-shm")
for s in sorted({k[1] for k in d}):
    cells, med = [], {}
    for t in tools:
        o = statistics.median(x[0] for x in d[(t, s)])
        ins = [x[1] for x in d[(t, s)] if x[1] is not None]
        med[t] = o
        cells.append("%7.2f/%-7s" % (o, "%.2f" % statistics.median(ins) if ins else "-"))
    print("%9d " % s + " ".join("%15s" % c for c in cells) +
          "   %.2fx, %.2fx" % (med["after"] / med["before"], med["after"] / med["mpi-shm"]))
PY
  echo
  echo "# every round: round tool size busbw-out-of-place busbw-in-place"
  sort -k3n -k2 -k1n "$D/all.txt"
} > "$OUT"
cat "$OUT"
