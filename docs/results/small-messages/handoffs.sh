#!/usr/bin/env bash
# handoffs.sh: what one 8-byte all-reduce at 2 ranks costs in system calls
# and context switches, per rank, over gradsync's sockets (--algo ring) and
# over shared memory (the default on one host): counts, not times, so that
# a noisy machine still gives them (docs/measurements.md, "Where an 8-byte
# all-reduce spends its time"). Writes
# docs/results/small-messages/<date>-handoffs.txt, whose first lines give
# the command, the commit, the machine and the date.
#
#   docs/results/small-messages/handoffs.sh [--base BENCH] [-r REPS] [--allow-dirty]
#
# Each count is a difference: the same job at -n 1200 and at -n 200 (the
# start, the warm-up and the teardown cancel), divided by the all-reduces
# between them per rank, 2 x 1000 (out of place and in place) for each of
# the 2 ranks; `perf stat` counts the system calls (the raw_syscalls and
# syscalls tracepoints: every thread of every rank and of the launcher, at
# far less cost than strace) and the context switches. The median over
# REPS interleaved repetitions (default 3). --base BENCH counts another
# build too, interleaved with this one (the build before a change).
set -euo pipefail
cd "$(dirname "$0")/../../.."
reps=3 base="" allow=""
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --allow-dirty) allow=--allow-dirty; shift ;;
    *) echo "usage: $0 [--base BENCH] [-r REPS] [--allow-dirty]" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "$0: needs perf" >&2; exit 1; }
B=${GS_BENCH:-build/bench/bench}
# the header, and the refusal of a dirty tree or of a bench built from
# another commit: tools/results_header.py, the rule of every results file
HDR=$(python3 tools/results_header.py --bench "$B" ${allow:+"$allow"} \
  --command "docs/results/small-messages/handoffs.sh ${args[*]}") || exit 1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
OUT=docs/results/small-messages/$(date -u +%F)-handoffs.txt
N1=200 N2=1200
# OpenBLAS's idle worker thread (the kernels table starts it; no all-reduce
# calls BLAS) yields the core in a loop for a while after it starts, which
# covers the whole of these short jobs: its sched_yield calls would be
# counted per all-reduce. One BLAS thread keeps it out of the counts.
export OPENBLAS_NUM_THREADS=1
builds=(this)
[ -n "$base" ] && builds+=(base)
CALLS="futex sched_yield poll ppoll getpid epoll_wait epoll_ctl read write sendto recvfrom"
EV=raw_syscalls:sys_enter,context-switches
for c in $CALLS; do EV=$EV,syscalls:sys_enter_$c; done
one() { # build path n rep: the counts of one job
  local bin=$B path=$2 n=$3 tag=$1-$2-$3-$4
  [ "$1" = base ] && bin=$base
  local algo=()
  [ "$path" = sockets ] && algo=(--algo ring)
  local cmd=("$bin" --mode ring --collective allreduce "${algo[@]}" --world 2 -b 8 -e 8 -n "$n"
             -w 5 -q)
  perf stat -x, -e "$EV" -o "$D/perf-$tag.txt" "${cmd[@]}" --out "$D/out-$tag" > /dev/null
}
for r in $(seq 1 "$reps"); do
  for b in "${builds[@]}"; do
    for p in shm sockets; do
      for n in $N1 $N2; do one "$b" "$p" "$n" "$r"; done
    done
  done
done
{
  echo "$HDR"
  [ -n "$base" ] && echo "# base: $base: $("$base" --version | head -1)"
  echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# jobs: bench --mode ring --collective allreduce [--algo ring] --world 2 -b 8 -e 8 -w 5 -n $N1 and -n $N2"
  python3 - "$D" "$reps" "$N1" "$N2" "${builds[@]}" <<'PY'
import statistics, sys
d, reps, n1, n2, builds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
ops = 2 * (n2 - n1) * 2  # per rank: out of place and in place; 2 ranks

def counts(path):
    got = {}
    for line in open(path):
        f = line.split(",")
        if len(f) > 2 and f[0].strip().isdigit():
            ev = f[2].replace("syscalls:sys_enter_", "").replace("raw_", "")
            got["system calls" if ev == "syscalls:sys_enter" else ev] = int(f[0])
    if "context-switches" not in got:
        raise SystemExit(f"{path}: perf counted nothing (perf_event_paranoid, tracefs?)")
    return got

for b in builds:
    for p in ("shm", "sockets"):
        per = {}
        for r in range(1, reps + 1):
            a = counts(f"{d}/perf-{b}-{p}-{n1}-{r}.txt")
            z = counts(f"{d}/perf-{b}-{p}-{n2}-{r}.txt")
            for k in z:
                per.setdefault(k, []).append((z[k] - a.get(k, 0)) / ops)
        print(f"\n## {b} build, {p}: per all-reduce per rank, median of {reps} (min-max)")
        for k, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {k:16s} {statistics.median(v):8.2f}  ({min(v):.2f} to {max(v):.2f})")
PY
} > "$OUT"
echo "handoffs.sh: wrote $OUT"
