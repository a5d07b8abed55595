#!/usr/bin/env bash
# own_model.sh: docs/own-model.md's four commands ("bring your own model") end to
# end on torchvision's resnet18, as a newcomer would run them, into
# docs/results/own-model/<date>-resnet18.txt; its first lines give the
# command, the commit, the machine and the date. Run from a clean commit
# (it refuses otherwise), as root for the emulated hosts, after building
# (build/bench/bench, or GS_BENCH). The commands run in a temporary directory, so the
# profile is resnet18.json there; the repository's paths are written as
# from its root.
set -euo pipefail
cd "$(dirname "$0")/../../.."
R=$(pwd)
B=${GS_BENCH:-$R/build/bench/bench}
# the header, and the refusal of a dirty tree or of a bench built from
# another commit: tools/results_header.py, the rule of every results file
HEADER=$(python3 tools/results_header.py --bench "$B" ${1:+"$1"} \
  --command "bash docs/results/own-model/own_model.sh $*") || exit 1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
OUT=docs/results/own-model/$(date -u +%F)-resnet18.txt
run() {
  echo
  echo "\$ $*"
  "$@" 2>&1
}
{
  echo "$HEADER"
  cd "$D"
  # 1. the profile: parameters, readiness order, each layer's time
  run /usr/bin/python3 "$R/tools/profile_model.py" torchvision:resnet18 --batch 16 --threads 2 \
      -o resnet18.json
  # 2. one process: the bucket plan, and the measured compute emulated
  run $B --mode local --model profile:resnet18.json --compute-scale 1 --batch 16 \
      --steps 4 --warmup 1 --threads 2 --out local
  # 3. DataParallel-style ps against DDP-style ring on 4 emulated hosts
  run $B --mode ps,ring --world 4 --hosts 4 --link 1gbit --model profile:resnet18.json \
      --compute-scale 0.1 --batch 16 --steps 12 --warmup 2 --repeat 1 --quiet --out hosts
  # 4. a cluster of 8-GPU hosts at 100 Gbit/s, compute 20 times this CPU's
  run $B --project --model profile:resnet18.json --compute-scale 0.05 --world 8,64,512 \
      --hosts-per 8 --link 100gbit --latency 5us --batch 16 --quiet --out projection
} | sed "s|$R/||g; s|$D/||g" > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"  # whole or not at all
echo "own_model.sh: wrote $OUT"
