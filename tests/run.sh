#!/usr/bin/env bash
# tests/run.sh: the whole test suite, twice: a plain optimized build (CUDA
# sources compiled too where the toolkit is, warnings as errors) and an
# AddressSanitizer + UBSan build; then, where clang with libFuzzer is
# installed, a clang ASan + UBSan build of the fuzz harnesses that replays
# their corpora and searches with each for $GS_FUZZ_SECONDS (default 30).
# Ends with "N passed, N failed", counted from meson's testlog.json of the
# builds.
#   tests/run.sh                   all three (fuzz only where clang is)
#   tests/run.sh plain|asan|fuzz   one of them
set -uo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
jobs=${GS_TEST_JOBS:-$(nproc)}
status=0
logs=()

run_build() { # name, meson options...
  local dir=build-$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  fi
  ninja -C "$dir" || return 1
  rm -f "$dir/meson-logs/testlog.json"
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs || status=1
  logs+=("$dir/meson-logs/testlog.json")
}

if [ "$which" = all ] || [ "$which" = plain ]; then
  run_build test -Dwerror=true --buildtype=debugoptimized || status=1
fi
if [ "$which" = all ] || [ "$which" = asan ]; then
  # CUDA objects are compiled in the plain build; ASan + nvcc do not mix.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_build asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
      -Dwerror=true --buildtype=debug || status=1
fi

# clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev)
have_libfuzzer() {
  command -v clang >/dev/null 2>&1 &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
      clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1
}

# Only the harnesses are built (the libraries instrumented for coverage),
# and only the fuzz suites run, two searches at a time.
run_fuzz() {
  local dir=build-fuzz
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" -Dfuzz=true -Dc_args=-fsanitize=fuzzer-no-link \
      -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled \
      --buildtype=debugoptimized >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  fi
  ninja -C "$dir" fuzz-harnesses || return 1
  rm -f "$dir/meson-logs/testlog.json"
  meson test -C "$dir" --no-rebuild --suite fuzz-corpus --suite fuzz \
    --num-processes "$jobs" --print-errorlogs || status=1
  logs+=("$dir/meson-logs/testlog.json")
}

if [ "$which" = fuzz ] || [ "$which" = all ]; then
  if have_libfuzzer; then
    run_fuzz || status=1
  elif [ "$which" = fuzz ]; then
    echo "tests/run.sh fuzz needs clang with libFuzzer (apt-get install clang libclang-rt-14-dev)"
    status=1
  else
    echo "fuzz: skipped (no clang with libFuzzer; apt-get install clang libclang-rt-14-dev)"
  fi
fi

python3 - "${logs[@]}" <<'PY'
import json, sys
passed = failed = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("result") in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r.get("result") == "SKIP":
            pass
        else:
            failed += 1
print(f"{passed} passed, {failed} failed")
PY
exit $status
