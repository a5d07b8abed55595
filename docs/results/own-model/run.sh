#!/usr/bin/env bash
# run.sh: docs/own-model.md's four commands ("bring your own model") end to
# end on torchvision's resnet18, as a newcomer would run them, into
# docs/results/own-model/<date>-resnet18.txt; its first lines give the
# command, the commit, the machine and the date. Run from a clean commit
# (it refuses otherwise), as root for the emulated hosts, after building
# (build/bench/bench). The profile and the runs go to a temporary
# directory, written DIR in the file.
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ -n "$(git status --porcelain)" ] && [ "${1:-}" != "--allow-dirty" ]; then
  echo "run.sh: the work tree has changes: commit them first (or --allow-dirty)" >&2
  exit 1
fi
B=build/bench/bench
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
OUT=docs/results/own-model/$(date -u +%F)-resnet18.txt
run() {
  echo
  echo "\$ $*"
  "$@" 2>&1
}
{
  echo "# command: bash docs/results/own-model/run.sh $*"
  echo "# commit: $(git rev-parse HEAD)$([ -n "$(git status --porcelain)" ] && echo ' (with uncommitted changes)')"
  echo "# machine: $(hostname), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(uname -sr)"
  echo "# date: $(date -u '+%F %T UTC')"
  echo "# bench: $($B --version | head -1)"
  # 1. the profile: parameters, readiness order, each layer's time
  run /usr/bin/python3 tools/profile_model.py torchvision:resnet18 --batch 16 --threads 2 \
      -o "$D/resnet18.json"
  # 2. one process: the bucket plan, and the measured compute emulated
  run $B --mode local --model "profile:$D/resnet18.json" --compute-scale 1 --batch 16 \
      --steps 4 --warmup 1 --threads 2 --quiet --out "$D/local"
  # 3. DataParallel-style ps against DDP-style ring on 4 emulated hosts
  run $B --mode ps,ring --world 4 --hosts 4 --link 1gbit --model "profile:$D/resnet18.json" \
      --compute-scale 0.1 --batch 16 --steps 12 --warmup 2 --repeat 1 --quiet --out "$D/hosts"
  # 4. a cluster of 8-GPU hosts at 100 Gbit/s, compute 20 times this CPU's
  run $B --project --model "profile:$D/resnet18.json" --compute-scale 0.05 --world 8,64,512 \
      --hosts-per 8 --link 100gbit --latency 5us --batch 16 --quiet --out "$D/projection"
} | sed "s|$D|DIR|g" > "$OUT"
echo "run.sh: wrote $OUT"
