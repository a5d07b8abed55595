#!/usr/bin/env bash
# tests/gpu/gpu_checks.sh: the GPU checks, on a machine with one or more NVIDIA GPUs.
#
#   tests/gpu/gpu_checks.sh                  build, kernel + NCCL tests, training comparisons
#   tests/gpu/gpu_checks.sh --kernels-only   build, kernel + NCCL tests only
#
# 1. builds build-gpu (CUDA and NCCL required, warnings as errors);
# 2. runs the gpu suite's programs directly (a skip counts as a failure
#    here: this script is only meaningful where a GPU is): every CUDA op
#    against the CPU table, and the NCCL backend with one rank per GPU;
# 3. trains MLP and LeNet with bench on the GPU in both modes and compares
#    the saved parameters with the same run on the CPU (close, not bitwise:
#    max|gpu - cpu| <= R * max|cpu| per tensor, R the fp32 bound that
#    tests/gpu/npycmp.c derives for 20 steps and the run's world; a NaN or an
#    infinity fails), for ring at world sizes
#    up to the GPU count, and ps at 1, 2 and 4 ranks (sharing GPUs when there
#    are fewer); runs two of them twice to check they are bitwise
#    reproducible; runs bench --collective on NCCL for every collective,
#    type and op (exact checks); and checks that ring with more ranks than
#    GPUs stops with the one-GPU-per-rank message.
# Prints what ran and what was compared; exits non-zero on any mismatch,
# failure, or a check that could not run.
# Env: GS_GPU_BUILD (build-gpu), GS_GPU_STEPS (20: the bound is derived for
#      20 steps; more let the parameters move further, and it may not hold),
#      GS_GPU_OUT (a temporary directory for the saved parameters).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
BUILD=${GS_GPU_BUILD:-build-gpu}
STEPS=${GS_GPU_STEPS:-20}
OUT=${GS_GPU_OUT:-$(mktemp -d -t gradsync-gpu.XXXXXX)}
kernels_only=0
[ "${1:-}" = "--kernels-only" ] && kernels_only=1
export OPENBLAS_NUM_THREADS=1
passed=0
failed=0
results=()

ok()   { passed=$((passed + 1)); results+=("PASS  $*"); echo "PASS  $*"; }
bad()  { failed=$((failed + 1)); results+=("FAIL  $*"); echo "FAIL  $*"; }

summary() {
  echo
  echo "==== tests/gpu/gpu_checks.sh summary ===="
  printf '%s\n' "${results[@]}"
  echo "$passed passed, $failed failed (saved parameters under $OUT)"
  [ "$failed" -eq 0 ]
  exit $?
}

# ---- GPUs ----
if ! command -v nvidia-smi >/dev/null 2>&1; then
  bad "nvidia-smi not found: no NVIDIA driver on this machine, nothing can be checked"
  summary
fi
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  vis=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
  [ "$vis" -lt "$ngpu" ] && ngpu=$vis
fi
if [ "$ngpu" -lt 1 ]; then
  bad "no GPU visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"
  summary
fi
echo "GPUs visible: $ngpu"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true

# ---- 1. build ----
if [ ! -f "$BUILD/build.ninja" ]; then
  if ! meson setup "$BUILD" -Dcuda=enabled -Dnccl=enabled -Dwerror=true \
      --buildtype=debugoptimized >"$BUILD.setup.log" 2>&1; then
    cat "$BUILD.setup.log"
    bad "meson setup $BUILD (CUDA and NCCL enabled)"
    summary
  fi
fi
if ninja -C "$BUILD"; then ok "build $BUILD with CUDA + NCCL, -Dwerror=true"
else bad "build $BUILD"; summary; fi

# ---- 2. kernel and NCCL programs (77 = skipped = not checked = failure here) ----
run_prog() { # name, program
  local name=$1 prog=$2
  echo "---- $name: $prog"
  "$prog"
  local rc=$?
  case $rc in
    0) ok "$name" ;;
    77) bad "$name was skipped: the program saw no usable GPU although nvidia-smi lists $ngpu" ;;
    *) bad "$name (exit $rc)" ;;
  esac
}
run_prog "every CUDA op vs the CPU table (tests/gpu/test_cuda_kernels.c)" \
  "$BUILD/tests/gpu/test_cuda_kernels"
run_prog "NCCL backend, one rank per GPU, up to 4 (tests/gpu/test_nccl.c)" \
  "$BUILD/tests/gpu/test_nccl"
[ "$kernels_only" -eq 1 ] && summary

# ---- 3. training: GPU vs CPU ----
BENCH=$BUILD/bench/bench
NPYCMP=$BUILD/tests/gpu/npycmp
if [ ! -x "$BENCH" ]; then
  bad "training comparisons NOT run: $BENCH is not built yet (the bench launcher)"
  summary
fi

# bench_run DIR LOG -- bench args...
bench_run() {
  local dir=$1 log=$2; shift 2
  rm -rf "$dir"
  echo "  \$ bench $* --save-params $dir"
  if ! timeout 600 "$BENCH" "$@" --save-params "$dir" >"$log" 2>&1; then
    echo "  bench failed; last lines of $log:"
    tail -n 20 "$log" | sed 's/^/    /'
    return 1
  fi
}

common=(--data synthetic --steps "$STEPS" --no-shuffle --seed 7)
declare -A batch=([mlp]=32 [lenet]=16)
declare -A spec=([mlp]="mlp:784-256-128-10" [lenet]="lenet")

ring_worlds=()
for w in 1 2 4 8; do [ "$w" -le "$ngpu" ] && ring_worlds+=("$w"); done
[[ " ${ring_worlds[*]} " == *" $ngpu "* ]] || ring_worlds+=("$ngpu")
ps_worlds=(1 2 4)

compare() { # label, mode, world, model
  local label=$1 mode=$2 w=$3 m=$4
  local base=$OUT/$m-$mode-w$w
  local args=(--mode "$mode" --world "$w" --model "${spec[$m]}" --batch "${batch[$m]}"
              "${common[@]}")
  echo "---- $label: $m, --mode $mode, --world $w, $STEPS steps, batch ${batch[$m]} per rank"
  if ! bench_run "$base-cpu" "$base-cpu.log" "${args[@]}" --device cpu; then
    bad "$label: $m $mode world $w: the CPU run failed"; return
  fi
  if ! bench_run "$base-cuda" "$base-cuda.log" "${args[@]}" --device cuda; then
    bad "$label: $m $mode world $w: the GPU run failed"; return
  fi
  if "$NPYCMP" --bound fp32 --world "$w" "$base-cuda" "$base-cpu"; then
    ok "$label: $m $mode world $w: GPU parameters match the CPU's (the fp32 bound)"
  else
    bad "$label: $m $mode world $w: GPU parameters differ from the CPU's (the fp32 bound)"
  fi
}

for m in mlp lenet; do
  for w in "${ring_worlds[@]}"; do compare "ring (NCCL)" ring "$w" "$m"; done
  for w in "${ps_worlds[@]}"; do
    share=""
    [ "$w" -gt "$ngpu" ] && share=" ($w ranks share $ngpu GPU(s))"
    compare "ps$share" ps "$w" "$m"
  done
done

# determinism: the same GPU run twice gives the same bits (docs/architecture.md, contract 2)
wmax=${ring_worlds[${#ring_worlds[@]}-1]}
for run in "ring $wmax" "ps 2"; do
  read -r mode w <<<"$run"
  m=mlp
  base=$OUT/$m-$mode-w$w
  echo "---- determinism: $m --mode $mode --world $w --device cuda, run again"
  if [ -d "$base-cuda" ] && bench_run "$base-cuda-again" "$base-cuda-again.log" \
      --mode "$mode" --world "$w" --model "${spec[$m]}" --batch "${batch[$m]}" \
      "${common[@]}" --device cuda && "$NPYCMP" --exact "$base-cuda-again" "$base-cuda"; then
    ok "determinism: $m $mode world $w on the GPU: bitwise identical over two runs"
  else
    bad "determinism: $m $mode world $w on the GPU: runs differ (or a run failed)"
  fi
done

# ps vs ring on the GPU: the same math, different summation order
if [ -d "$OUT/mlp-ring-w1-cuda" ] && [ -d "$OUT/mlp-ps-w1-cuda" ]; then
  echo "---- ps vs ring on the GPU, mlp, world 1"
  if "$NPYCMP" --bound fp32 "$OUT/mlp-ps-w1-cuda" "$OUT/mlp-ring-w1-cuda"; then
    ok "ps and ring agree on the GPU (mlp, world 1, the fp32 bound)"
  else
    bad "ps and ring disagree on the GPU (mlp, world 1)"
  fi
fi

# the collective benchmark on NCCL (allreduce/nccl/nccl_coll.c): every collective
# and type, and every op where it reduces, checked exactly by bench itself
# (a wrong value exits non-zero), at up to 4 ranks, one per GPU
cw=$ngpu; [ "$cw" -gt 4 ] && cw=4
echo "---- bench --collective on NCCL, --world $cw"
ncoll_bad=0
for c in all_reduce reduce_scatter all_gather broadcast reduce; do
  for t in float half bfloat16 double int32; do
    ops=(sum)
    [ "$c" != all_gather ] && [ "$c" != broadcast ] && ops=(sum avg prod min max)
    for o in "${ops[@]}"; do
      r=(); [ "$c" = broadcast ] || [ "$c" = reduce ] && r=(-r $((cw - 1)))
      [ "$c" = all_gather ] || [ "$c" = broadcast ] || r+=(-o "$o")
      log=$OUT/collective-$c-$t-$o.log
      if ! timeout 300 "$BENCH" --mode ring --device cuda --world "$cw" --collective "$c" \
          -d "$t" "${r[@]}" -b 8 -e 8M -f 8 --out "$OUT/collective" >"$log" 2>&1; then
        ncoll_bad=$((ncoll_bad + 1))
        echo "  FAILED: --collective $c -d $t ${r[*]}"; tail -n 5 "$log" | sed 's/^/    /'
      fi
    done
  done
done
if [ "$ncoll_bad" -eq 0 ]; then ok "bench --collective on NCCL: every collective, type and op"
else bad "bench --collective on NCCL: $ncoll_bad run(s) failed (logs under $OUT)"; fi

# ring with more ranks than GPUs: a clear error before NCCL starts
over=$((ngpu + 1))
echo "---- ring with $over ranks on $ngpu GPU(s) must stop with the one-GPU-per-rank message"
log=$OUT/ring-oversubscribed.log
if timeout 300 "$BENCH" --mode ring --world "$over" --device cuda --model "${spec[mlp]}" \
    --batch 8 "${common[@]}" >"$log" 2>&1; then
  bad "ring with $over ranks on $ngpu GPU(s) ran instead of refusing"
elif grep -q "needs one GPU per rank" "$log" && grep -q -- "--mode=ps" "$log"; then
  ok "ring with $over ranks on $ngpu GPU(s) refused: $(grep -m1 'needs one GPU per rank' "$log")"
else
  bad "ring with $over ranks on $ngpu GPU(s) failed without the one-GPU-per-rank message"
  tail -n 10 "$log" | sed 's/^/    /'
fi

summary
