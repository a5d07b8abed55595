#!/usr/bin/env bash
# small_messages.sh: issue 48's measurement as users make it: `bench
# --collective allreduce -b 8 -e 256M -f 4` at 2 and 4 ranks beside Gloo,
# Open MPI over TCP and Open MPI over shared memory, in interleaved rounds,
# medians per size. bench/peers/run_peers.sh runs the tools (gradsync by
# default, i.e. shared memory on one host, and over its sockets alone,
# GS_SHM=0) and compare.py takes the medians; this script only fixes the
# sweep and writes docs/results/small-messages/<date>-small-messages.txt,
# whose first lines give the command, the commit, the machine and the date.
#
#   docs/results/small-messages/small_messages.sh [-r ROUNDS] [-n ITERS] [-w WARMUP]
#        [-e MAXBYTES] [-N "2 4"] [--allow-dirty]
#
# -e and -N only to try the script at small sizes; the published file is
# the full sweep, from a clean commit (refused otherwise), with bench built
# from it (build/bench/bench, or GS_BENCH=path; --build in run_peers.sh's
# sense is its directory). Needs mpicc/mpirun (openmpi-bin, libopenmpi-dev)
# and PyTorch for /usr/bin/python3 (Gloo). Run it in a quiet sitting: the
# figures are wall-clock.
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=3 n=20 w=5 e=256M worlds="2 4" allow=""
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -w) w=$2; shift 2 ;;
    -e) e=$2; shift 2 ;;
    -N) worlds=$2; shift 2 ;;
    --allow-dirty) allow=--allow-dirty; shift ;;
    *) echo "usage: $0 [-r ROUNDS] [-n ITERS] [-w WARMUP] [-e MAXBYTES] [-N \"2 4\"] [--allow-dirty]" >&2
       exit 2 ;;
  esac
done
B=${GS_BENCH:-build/bench/bench}
# the header, and the refusal of a dirty tree or of a bench built from
# another commit: tools/results_header.py, the rule of every results file
HDR=$(python3 tools/results_header.py --bench "$B" ${allow:+"$allow"} \
  --command "docs/results/small-messages/small_messages.sh ${args[*]}") || exit 1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
OUT=docs/results/small-messages/$(date -u +%F)-small-messages.txt
# run_peers.sh wants the build directory: bench is its bench/bench
build=$(dirname "$(dirname "$B")")
bench/peers/run_peers.sh -b 8 -e "$e" -f 4 -n "$n" -w "$w" -N "$worlds" -r "$rounds" -o "$D" \
  --build "$build" >&2
{
  echo "$HDR"
  echo "# what ran: bench/peers/run_peers.sh -b 8 -e $e -f 4 -n $n -w $w -N \"$worlds\" -r $rounds"
  sed 's/^/# /' "$D/info.txt"
  echo
  cat "$D/compare.txt"
} > "$OUT"
echo "small_messages.sh: wrote $OUT"
