#!/usr/bin/env bash
# bench/peers/run_peers.sh: gradsync, as `bench --collective allreduce` runs it
# (the program users run: on one host, its shared-memory all-reduce), and
# its socket algorithms alone (GS_SHM=0: rd, then the ring, over loopback
# TCP), next to Gloo (PyTorch) and Open MPI (TCP and shared memory),
# all-reduce of float32 over the same sizes, in one sitting. Benchmarks, not tests. Every tool checks its results against the
# exact sum and prints the nccl-tests table; compare.py puts the medians
# side by side.
#
#   bench/peers/run_peers.sh [-b 8] [-e 256M] [-f 2] [-n 20] [-w 5] [-N "2 4"]
#                      [-r rounds] [-o results/peers] [--build build]
#                      [--sizes "8 1M 2M ..."]
#
# floor.c first measures the transports themselves (ZeroMQ and plain TCP
# latency and stream cost): the floor under every tool's figures.
#
# Rounds interleave the tools (shm, ring, gloo, mpi-tcp, mpi-shm, shm, ...) so a
# noisy neighbour hurts them alike; compare.py reports the median per size
# over the rounds. With --sizes each size is a separate run
# of every tool in turn (size-major), which spreads a neighbour's burst over
# the tools even more evenly, at the cost of one start-up per run. Binding:
# one rank per core when there are no more ranks than cores (Open MPI's
# default; bench pins itself the same way), none otherwise, for every
# tool.
set -euo pipefail
cd "$(dirname "$0")/../.."
b=8 e=256M f=2 n=20 w=5 worlds="2 4" rounds=1 out=results/peers build=build sizes=""
while [ $# -gt 0 ]; do
  case $1 in
    -b) b=$2; shift 2 ;;
    -e) e=$2; shift 2 ;;
    -f) f=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -w) w=$2; shift 2 ;;
    -N) worlds=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    *) echo "usage: $0 [-b B] [-e B] [-f F] [-n N] [-w N] [-N \"2 4\"] [-r R] [-o DIR] [--build DIR]" >&2; exit 2 ;;
  esac
done
bench=$build/bench/bench
[ -x "$bench" ] || { echo "no $bench: build gradsync first (meson setup $build && ninja -C $build)" >&2; exit 1; }
mkdir -p "$out"
mpi=$out/mpi_allreduce
mpicc -O2 -o "$mpi" bench/peers/mpi_allreduce.c
cc -O2 -o "$out/floor" bench/peers/floor.c -lzmq
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cores=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS
mpirun_base=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1)
{
  echo "date: $(date -Is)"
  echo "host: $(uname -srm), $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "gradsync: git $(python3 tools/git_revision.py . 2>/dev/null || echo unknown)"  # +dirty: uncommitted changes
  echo "torch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
  echo "open mpi: $(mpirun --version | head -1)"
  echo "args: -b $b -e $e -f $f -n $n -w $w, ranks $worlds, $rounds rounds${sizes:+, sizes $sizes}"
} > "$out/info.txt"
cat "$out/info.txt"
# what the transports themselves cost here (latency and stream floors)
"$out/floor" > "$out/floor.txt"
one() { # tool N round min max: append one table to $out/tool-N-round.txt
  local tool=$1 N=$2 r=$3 lo=$4 hi=$5
  local bind=(--bind-to core) pin=1
  if [ "$N" -gt "$cores" ]; then bind=(--bind-to none); pin=0; fi
  echo "round $r, $N ranks, $lo..$hi: $tool" >&2
  case $tool in
    shm) "$bench" --mode ring --collective allreduce --world "$N" -b "$lo" -e "$hi" -f "$f" \
           -n "$n" -w "$w" --out "$out/bench" ;;
    ring) GS_SHM=0 "$bench" --mode ring --collective allreduce --world "$N" -b "$lo" -e "$hi" \
            -f "$f" -n "$n" -w "$w" --out "$out/bench" ;;
    gloo) GS_PIN=$pin /usr/bin/python3 bench/peers/gloo_allreduce.py -N "$N" -b "$lo" -e "$hi" \
            -f "$f" -n "$n" -w "$w" ;;
    mpi-tcp) "${mpirun_base[@]}" "${bind[@]}" -np "$N" --mca btl tcp,self \
               --mca btl_tcp_if_include lo "$mpi" -b "$lo" -e "$hi" -f "$f" -n "$n" -w "$w" \
               -t "Open MPI MPI_Allreduce, btl tcp" ;;
    mpi-shm) "${mpirun_base[@]}" "${bind[@]}" -np "$N" --mca btl vader,self \
               "$mpi" -b "$lo" -e "$hi" -f "$f" -n "$n" -w "$w" \
               -t "Open MPI MPI_Allreduce, btl vader" ;;
  esac >> "$out/$tool-$N-$r.txt"
}
for r in $(seq 1 "$rounds"); do
  for N in $worlds; do
    if [ -z "$sizes" ]; then
      for tool in shm ring gloo mpi-tcp mpi-shm; do one $tool "$N" "$r" "$b" "$e"; done
    else
      for s in $sizes; do
        for tool in shm ring gloo mpi-tcp mpi-shm; do one $tool "$N" "$r" "$s" "$s"; done
      done
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/info.txt"
{ /usr/bin/python3 bench/peers/compare.py "$out"; echo; cat "$out/floor.txt"; } | tee "$out/compare.txt"
