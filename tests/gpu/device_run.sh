#!/usr/bin/env bash
# tests/gpu/device_run.sh: every GPU check and GPU measurement in one short
# run, for a GPU machine that has no build tools for gradsync's
# dependencies: it runs the folder that tests/gpu/bundle.sh makes.
#
#   tests/gpu/bundle.sh gpu-bundle            (here, where gradsync builds)
#   tests/gpu/device_run.sh gpu-bundle        (there; about 6 minutes)
#
# Writes under $OUT (a temporary folder when unset): summary.txt (one PASS /
# FAIL / SKIP line per check, the tables against PyTorch), device_run.log
# (everything printed) and details.tar.gz (each run's own log and results).
# Every check has a threshold that a wrong result crosses (below, per
# section); a section that does not run says "SKIP <section>: <why>" and is
# counted in the last line ("N passed, N failed, N skipped"): one that would
# overrun the budget, one that GS_DEVICE_ONLY leaves out, a reference that
# is missing (PyTorch's CUDA graphs, CAP_NET_ADMIN).
# Env: GS_DEVICE_BUDGET (seconds, default 420), GS_DEVICE_ONLY (a list of
#      sections to run, by key: kernels nccl train coll torch modes gemm
#      cpusweep allreduce hosts; default all).
#
# What it runs, in order, and what fails it:
#  1. every CUDA kernel against the CPU table (tests/gpu/test_cuda_kernels:
#     fp32/fp16/bf16, lengths 0, 1, odd and 2^24+3, pointers 1 and 3
#     elements into an allocation; cuBLAS GEMMs against the CPU table's
#     OpenBLAS within the two-summation-orders bound), and the NCCL backend
#     (tests/gpu/test_nccl, one rank per GPU);
#     (the programs' own bounds: exact, or the two-summation-orders bound
#     for GEMMs; a program that sees no GPU fails here);
#  2. world-1 training on the GPU against the CPU, local, ring (NCCL) and
#     ps, mlp and lenet, fp32, and local in fp16 and bf16; the ps master on
#     the GPU with 2 and 4 ranks sharing it: max|gpu - cpu| <= R * max|cpu|
#     per tensor, R derived from what each precision carries (npycmp
#     --bound: fp32 1.91e-6, fp16 9.78e-4, bf16 3.91e-3 at world 1; the
#     derivation is in tests/gpu/npycmp.c), a NaN or infinity anywhere
#     fails; one GPU run twice, bitwise equal;
#  3. NCCL through bench --collective at world 1 (every collective, the
#     dtypes and ops), every result checked exactly by bench (-c 1: a wrong
#     value exits non-zero), and ring at world 2 on one GPU refused with
#     the one-GPU-per-rank message (NCCL does not take two ranks on one GPU);
#  4. against PyTorch on the same GPU: training throughput of
#     mlp:784-2048-2048-10 at batch 64 and 1024 (bench/peers/
#     compare_single.py, interleaved runs, medians) beside eager PyTorch
#     and PyTorch with the step captured in a CUDA graph (where this torch
#     can): at batch 1024 at least 0.95x each; local, ring and ps at world
#     1, batch 1024: ring and ps at least 0.90x local; GEMM TFLOP/s against
#     torch.matmul on the step's shapes (tests/gpu/gemm_bench,
#     bench/peers/torch_gemm.py): the step at batch 1024 at least 0.95x,
#     fp32 and bf16 (tests/gpu/device_checks.py holds these thresholds);
#  5. on the machine's CPU cores: ps vs ring at world 2, 4, 8 (every step
#     measured with a finite loss, ps and ring at the same final loss
#     within 1e-5); the all-reduce at N = 2, 4, 8 (checked exactly) beside
#     Gloo; and, with CAP_NET_ADMIN, the cost model fitted on 2 emulated
#     hosts and checked at 4 and 8 (projected/measured within [0.75, 1.25]).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=$(cd "${1:-gpu-bundle}" 2>/dev/null && pwd) ||
  { echo "device_run.sh: no bundle folder ${1:-gpu-bundle} (make it with tests/gpu/bundle.sh)" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d -t gradsync-device.XXXXXX)}
mkdir -p "$OUT" || exit 2
BUDGET=${GS_DEVICE_BUDGET:-420}
W=$(mktemp -d -t gradsync-work.XXXXXX)
SUM=$OUT/summary.txt
LOG=$OUT/device_run.log
: >"$SUM"
exec > >(tee -a "$LOG") 2>&1
start=$(date +%s)
export OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
GS_BUNDLE_VERBOSE=1 . "$B/env.sh"
BENCH=$B/bench/bench
PY=$(command -v python3)
passed=0 failed=0 skipped=0

say()  { echo "$*" | tee -a "$SUM"; }
ok()   { passed=$((passed + 1)); say "PASS  $*"; }
bad()  { failed=$((failed + 1)); say "FAIL  $*"; }
skip() { skipped=$((skipped + 1)); say "SKIP  $*"; }
left() { echo $((BUDGET - ($(date +%s) - start))); }
# section KEY NAME SECONDS: false (and a SKIP line) when fewer seconds are
# left, or when GS_DEVICE_ONLY leaves KEY out
section() {
  local key=$1; shift
  if [ -n "${GS_DEVICE_ONLY:-}" ] && [[ " $GS_DEVICE_ONLY " != *" $key "* ]]; then
    skip "$key ($1): left out by GS_DEVICE_ONLY=\"$GS_DEVICE_ONLY\""; return 1
  fi
  local l; l=$(left)
  echo; echo "==== $1 (t=$(( $(date +%s) - start ))s, ${l}s left)"
  if [ "$l" -lt "$2" ]; then skip "$key ($1): needs ~$2 s, ${l} s of the budget left"; return 1; fi
}
# judge LABEL CHECK ARGS...: tests/gpu/device_checks.py's verdicts (a line
# "PASS|FAIL|SKIP<TAB>what" each) counted; a check that cannot judge fails
judge() {
  local label=$1; shift
  local out rc v what
  out=$("$PY" tests/gpu/device_checks.py "$@" 2>&1); rc=$?
  while IFS=$'\t' read -r v what; do
    case $v in
      PASS) ok "$what" ;;
      FAIL) bad "$what" ;;
      SKIP) skip "$what" ;;
      *) [ -n "$v$what" ] && say "$v${what:+ $what}" ;;
    esac
  done <<<"$out"
  [ $rc -eq 0 ] || bad "$label: could not be judged (device_checks.py $1 exit $rc)"
}
finish() {
  echo
  say "$passed passed, $failed failed, $skipped skipped in $(( $(date +%s) - start )) s"
  tar czf "$OUT/details.tar.gz" --exclude='*.npy' --exclude=trace.json -C "$W" . 2>/dev/null
  rm -rf "$W"
  exit $((failed > 0))
}
trap finish TERM INT

{
  echo "command: GS_DEVICE_BUDGET=$BUDGET${GS_DEVICE_ONLY:+ GS_DEVICE_ONLY=\"$GS_DEVICE_ONLY\"} tests/gpu/device_run.sh ${1:-gpu-bundle}"
  echo "date: $(date -Is)"
  echo "bundle: $(cat "$B/BUILD-INFO" 2>/dev/null | tr '\n' ' ')"
  echo "machine: $(uname -srm), $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "python: $PY; torch $($PY -c 'import torch; print(torch.__version__, torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1 | tail -1)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  "$BENCH" --version 2>&1
} | tee -a "$SUM"

# ---- 1. kernels and the NCCL backend ----
prog() { # label timeout program args...
  local label=$1 t=$2; shift 2
  local log=$W/$(basename "$1").log
  timeout "$t" "$@" >"$log" 2>&1
  local rc=$?
  tail -n 5 "$log"
  case $rc in
    0) ok "$label: $(tail -n 1 "$log")" ;;
    77) bad "$label skipped: the program saw no usable GPU" ;;
    124) bad "$label: timed out after $t s" ;;
    *) bad "$label (exit $rc): $(grep -m3 -E 'differ|fail|error|FAIL' "$log" | tr '\n' ' ')" ;;
  esac
}
if section kernels "CUDA kernels vs the CPU table" 60; then
  prog "every CUDA op vs the CPU table (fp32/fp16/bf16, lengths 0..2^24+3, offsets 0/1/3)" 150 \
    "$B/tests/gpu/test_cuda_kernels"
fi
if section nccl "NCCL backend" 30; then
  prog "NCCL backend, one rank per GPU (tests/gpu/test_nccl)" 90 "$B/tests/gpu/test_nccl"
fi

# ---- 2. training: GPU against CPU ----
bench_run() { # name -- bench args... ; saves params in $W/name, log $W/name.log
  local name=$1; shift
  rm -rf "$W/$name" "$W/$name.out"
  timeout 180 "$BENCH" "$@" --save-params "$W/$name" --out "$W/$name.out" -q >"$W/$name.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && { echo "  $name failed ($rc):"; tail -n 8 "$W/$name.log" | sed 's/^/    /'; }
  return $rc
}
compare() { # label precision mode world model batch [extra...]
  local label=$1 prec=$2 mode=$3 w=$4 m=$5 b=$6; shift 6
  local n; n=$(echo "$mode-$w-$m-$b$*" | tr ':/ ' '___')
  local args=(--mode "$mode" --world "$w" --model "$m" --batch "$b" --steps 20 --warmup 2
              --data synthetic --no-shuffle --seed 7 "$@")
  if ! bench_run "$n-cpu" "${args[@]}" --device cpu; then bad "$label: CPU run failed"; return; fi
  if ! bench_run "$n-gpu" "${args[@]}" --device cuda; then
    bad "$label: GPU run failed: $(grep -m1 'bench:' "$W/$n-gpu.log")"; return
  fi
  if "$B/tests/gpu/npycmp" --bound "$prec" --world "$w" "$W/$n-gpu" "$W/$n-cpu" >"$W/$n.cmp" 2>&1; then
    ok "$label: GPU parameters match the CPU's after 20 steps ($prec bound): $(tail -n1 "$W/$n.cmp")"
  else
    bad "$label: GPU parameters differ from the CPU's ($prec bound): $(tail -n2 "$W/$n.cmp" | tr '\n' ' ')"
  fi
}
if section train "training, GPU vs CPU" 60; then
  for mode in local ring ps; do
    compare "$mode world 1 mlp" fp32 "$mode" 1 mlp:784-256-128-10 32
    compare "$mode world 1 lenet" fp32 "$mode" 1 lenet 16
  done
  compare "local world 1 mlp bf16" bf16 local 1 mlp:784-256-128-10 32 --precision bf16
  compare "local world 1 mlp fp16" fp16 local 1 mlp:784-256-128-10 32 --precision fp16
  for w in 2 4; do
    compare "ps world $w (ranks share the GPU, master on it)" fp32 ps "$w" mlp:784-256-128-10 32
  done
  if bench_run again --mode ps --world 2 --model mlp:784-256-128-10 --batch 32 --steps 20 --warmup 2 \
       --data synthetic --no-shuffle --seed 7 --device cuda &&
     "$B/tests/gpu/npycmp" --exact "$W/again" "$W/ps-2-mlp_784-256-128-10-32-gpu" >"$W/again.cmp" 2>&1; then
    ok "determinism: ps world 2 on the GPU twice, bitwise equal"
  else
    bad "determinism: ps world 2 on the GPU, runs differ or failed"
  fi
fi

# ---- 3. NCCL through the collective benchmark ----
if section coll "NCCL collectives at world 1" 40; then
  nb=0 nr=0
  coll() { # args...
    nr=$((nr + 1))
    local log=$W/coll-$nr.log
    if ! timeout 60 "$BENCH" --mode ring --device cuda --world 1 "$@" -b 8 -e 64M -f 16 -n 5 -w 2 -c 1 \
        --out "$W/coll-$nr" >"$log" 2>&1; then
      nb=$((nb + 1)); echo "  FAILED: --collective $*"; tail -n 4 "$log" | sed 's/^/    /'
    fi
  }
  for t in float half bfloat16 double int32; do coll --collective all_reduce -d "$t"; done
  for o in avg prod min max; do coll --collective all_reduce -o "$o"; done
  for c in reduce_scatter all_gather broadcast reduce; do coll --collective "$c"; done
  sed -n '/#  *size/,$p' "$W/coll-1.log" | head -n 12
  if [ "$nb" -eq 0 ]; then ok "bench --collective on NCCL, world 1: $nr runs (collectives, dtypes, ops), checked exactly"
  else bad "bench --collective on NCCL, world 1: $nb of $nr runs failed"; fi
  log=$W/ring-2-on-1.log
  if timeout 60 "$BENCH" --mode ring --world 2 --device cuda --model mlp:784-64-10 --steps 3 \
       --out "$W/ring-2-on-1" >"$log" 2>&1; then
    bad "ring with 2 ranks on 1 GPU ran instead of refusing"
  elif grep -q "needs one GPU per rank" "$log"; then
    ok "ring with 2 ranks on 1 GPU refused: $(grep -m1 'needs one GPU per rank' "$log")"
  else
    bad "ring with 2 ranks on 1 GPU failed without the one-GPU-per-rank message: $(tail -n 2 "$log" | tr '\n' ' ')"
  fi
fi

# ---- 4. against PyTorch on the same GPU ----
if section torch "training throughput vs PyTorch on the GPU" 90; then
  if timeout 360 "$PY" bench/peers/compare_single.py --bench "$BENCH" --device cuda \
      --model mlp:784-2048-2048-10 --batch 64,1024 --steps 200 --warmup 20 --threads 1 \
      --repeat 3 --graph --json "$W/vs-torch.json" >"$W/vs-torch.txt" 2>&1; then
    say "$(cat "$W/vs-torch.txt")"
    judge "training throughput vs PyTorch" torch "$W/vs-torch.json"
  else
    bad "training throughput vs PyTorch: $(tail -n 5 "$W/vs-torch.txt" | tr '\n' ' ')"
  fi
fi
if section modes "GPU modes at world 1, batch 1024" 30; then
  # one invocation per mode: a list of modes runs world 1 once, as local
  reports=()
  for mode in local ring ps; do
    if timeout 120 "$BENCH" --device cuda --mode $mode --world 1 --batch 1024 --steps 200 \
        --warmup 20 --out "$W/gpu-$mode" >"$W/gpu-$mode.log" 2>&1; then
      say "$(grep -E '^(==|  throughput|  rank|  [0-9] )' "$W/gpu-$mode.log")"
      reports+=("$W/gpu-$mode/report.json")
    else
      bad "GPU $mode at world 1: $(tail -n 3 "$W/gpu-$mode.log" | tr '\n' ' ')"
    fi
  done
  [ ${#reports[@]} -gt 0 ] && judge "GPU modes at world 1" modes "${reports[@]}"
fi
if section gemm "GEMM vs torch.matmul" 30; then
  for dt in fp32 bf16; do
    timeout 60 "$B/tests/gpu/gemm_bench" --batch 64,1024 --dtype $dt >"$W/gemm-$dt.txt" 2>&1
    timeout 90 "$PY" bench/peers/torch_gemm.py --batch 64,1024 --dtype $dt >"$W/torch-gemm-$dt.txt" 2>&1
    say "$(paste -d'|' "$W/gemm-$dt.txt" "$W/torch-gemm-$dt.txt")"
    judge "GEMMs $dt vs torch.matmul" gemm "$W/gemm-$dt.txt" "$W/torch-gemm-$dt.txt"
  done
fi

# ---- 5. the CPU side on this machine's cores ----
if section cpusweep "CPU: ps vs ring at world 2, 4, 8" 60; then
  if timeout 200 "$BENCH" --device cpu --mode ps,ring --world 2,4,8 --steps 30 --warmup 5 --link none --repeat 1 \
      --out "$W/cpu-sweep" >"$W/cpu-sweep.log" 2>&1; then
    say "$(grep -E '^(==|  throughput|world|NOTE|verdict)' "$W/cpu-sweep.log")"
    judge "CPU sweep ps vs ring at world 2, 4, 8" sweep "$W/cpu-sweep/report.json"
  else
    bad "CPU sweep: $(tail -n 3 "$W/cpu-sweep.log" | tr '\n' ' ')"
  fi
fi
if section allreduce "CPU: all-reduce vs Gloo at N = 2, 4, 8" 60; then
  arbad=$failed
  for n in 2 4 8; do
    timeout 60 "$BENCH" --mode ring --collective allreduce --device cpu --world $n \
      -b 1K -e 64M -f 16 -n 10 -w 3 -c 1 --out "$W/ar-$n" >"$W/ar-$n.log" 2>&1 ||
      bad "all-reduce N=$n: $(tail -n 2 "$W/ar-$n.log" | tr '\n' ' ')"
    timeout 90 "$PY" bench/peers/gloo_allreduce.py -N $n -b 1K -e 64M -f 16 -n 10 -w 3 \
      >"$W/gloo-$n.log" 2>&1 || bad "Gloo N=$n: $(tail -n 2 "$W/gloo-$n.log" | tr '\n' ' ')"
    say "---- N=$n: gradsync (left) | Gloo (right)"
    say "$(paste -d'|' <(grep -E '^ *#|^ +[0-9]' "$W/ar-$n.log") <(grep -E '^ *#|^ +[0-9]' "$W/gloo-$n.log"))"
  done
  [ "$failed" -eq "$arbad" ] && ok "all-reduce at N = 2, 4, 8, every result exact (-c 1), beside Gloo (tables above)"
fi
if section hosts "cost model on emulated hosts" 90; then
  if ip netns add gs-probe-$$ 2>/dev/null && ip netns del gs-probe-$$; then
    M=(--model mlp:784-1024-1024-10 --batch 16)
    cpu=(--device cpu)  # one GPU cannot hold a ring of ranks (NCCL: one GPU per rank)
    if timeout 60 "$BENCH" --calibrate --hosts 2 --link 1gbit "${M[@]}" --out "$W/cal.json" \
        >"$W/cal.log" 2>&1 &&
       timeout 150 "$BENCH" --mode ps,ring --world 2,4,8 "${M[@]}" "${cpu[@]}" --link 1gbit --steps 8 --warmup 2 \
        --out "$W/hosts" >"$W/hosts.log" 2>&1 &&
       timeout 30 "$BENCH" --project --calibration "$W/cal.json" --world 2,4,8 "${M[@]}" \
        --hosts-per 1 --out "$W/proj" >"$W/proj.log" 2>&1; then
      say "$(grep -iE 'link|latency' "$W/cal.log" | head -n 4)"
      say "$(grep -E '^(==|  throughput)' "$W/hosts.log")"
      say "$(cat "$W/proj.log" | head -n 30)"
      judge "cost model on emulated hosts" hosts "$W/hosts/report.json" "$W/proj/projection.json"
    else
      bad "emulated hosts: $(tail -n 3 "$W/cal.log" "$W/hosts.log" "$W/proj.log" 2>/dev/null | tr '\n' ' ')"
    fi
  else
    skip "hosts (cost model on emulated hosts): no CAP_NET_ADMIN here (ip netns add failed)"
  fi
fi
finish
