#!/bin/sh
# run_fuzz.sh: one libFuzzer search, as the 'fuzz' suite runs it.
#   run_fuzz.sh HARNESS SEEDS WORK [SECONDS]
# Searches for SECONDS (default $GS_FUZZ_SECONDS, else 30) from the seeds
# in SEEDS (read only) and what earlier runs found in WORK/corpus (new
# inputs go there), with the dictionary dict/<name>.dict when there is
# one. A failing input is saved in WORK/crashes/ and the run fails; the
# last lines give libFuzzer's coverage and speed (cov, ft, exec/s).
set -u
exe=$1 seeds=$2 work=$3
secs=${4:-${GS_FUZZ_SECONDS:-30}}
name=$(basename "$seeds")
dict="$(dirname "$0")/dict/$name.dict"
mkdir -p "$work/corpus" "$work/crashes"
set -- -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -close_fd_mask=3 -artifact_prefix="$work/crashes/"
[ -f "$dict" ] && set -- "$@" -dict="$dict"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
log="$work/last.log"
timeout -k 10 $((secs + 300)) "$exe" "$@" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done |stat::number_of_executed_units|stat::peak_rss' "$log"
if [ $rc -ne 0 ]; then
  tail -n 60 "$log"
  echo "fuzz_$name failed (exit $rc); the input is in $work/crashes/." \
       "Reproduce: $exe $work/crashes/<file>. Once fixed, copy it to $seeds/" \
       "under a name that says what it was."
fi
# libFuzzer reports a finding with 77, which meson would count as a skip
[ $rc -ne 0 ] && exit 1
exit 0
