#!/usr/bin/env bash
# buckets.sh: docs/buckets.md's sweep of DDP's bucket size on the ResNet-50
# profile, ring at world 2, on loopback (3 repetitions a size) and on 2
# emulated hosts at 100 Mbit/s (1 repetition: each step takes seconds
# there), as users run it: two bench invocations, their console output
# kept whole (the "== bucket size ==" verdict, each size's step and exposed
# communication). Writes docs/results/buckets/<date>-buckets.txt, its first
# lines from tools/results_header.py (a clean commit, bench built from it).
#
#   docs/results/buckets/buckets.sh [--quick] [--allow-dirty]
#
# --quick: 2 steps a run, 1 repetition, only to try the script. Needs root
# for the emulated hosts. Run it in a quiet sitting: steps are wall-clock.
set -euo pipefail
cd "$(dirname "$0")/../../.."
allow="" quick="" args=("$@")
for a in "$@"; do
  case $a in
    --allow-dirty) allow=--allow-dirty ;;
    --quick) quick=1 ;;
    *) echo "usage: $0 [--quick] [--allow-dirty]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "buckets.sh: needs root (bench --hosts makes network namespaces)" >&2; exit 2; }
B=${GS_BENCH:-build/bench/bench}
HDR=$(python3 tools/results_header.py --bench "$B" ${allow:+"$allow"} \
  --command "docs/results/buckets/buckets.sh ${args[*]}") || exit 1
export OPENBLAS_NUM_THREADS=1
load_before=$(cut -d" " -f1-3 /proc/loadavg)
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
if [ -n "$quick" ]; then lo=(--repeat 1 --steps 2 --warmup 1); hi=(--steps 2 --warmup 1)
else lo=(--repeat 3 --steps 6 --warmup 2); hi=(--steps 3 --warmup 1); fi
run() { # NAME ARGS...: one bench invocation, its command and its output
  local name=$1; shift
  echo "\$ bench $*" >"$D/$name.txt"
  if ! timeout 1800 "$B" "$@" --out "$D/$name" >>"$D/$name.txt" 2>&1; then
    echo "buckets.sh: the $name sweep failed (bench $*):" >&2; tail -n 20 "$D/$name.txt" >&2; exit 1
  fi
}
run loopback --mode ring --world 2 --link none "${lo[@]}" --threads 1 --model resnet50 \
  --compute-ms 50 --bucket-mb 1,5,25,100
run 100mbit --mode ring --world 2 --hosts 2 --link 100mbit --repeat 1 "${hi[@]}" --threads 1 \
  --model resnet50 --compute-ms 50 --bucket-mb 1,5,25,100 --timeout 120
OUT=docs/results/buckets/$(date -u +%F)-buckets.txt
{
  echo "$HDR"
  echo "# load average before, after: $load_before, $(cut -d" " -f1-3 /proc/loadavg)"
  echo "# two sweeps, one after the other; each bench's own output below, its results folder (--out) not kept"
  for n in loopback 100mbit; do echo; echo "## $n"; sed "s|$D/|OUT/|g" "$D/$n.txt"; done
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "buckets.sh: wrote $OUT"
