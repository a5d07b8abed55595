#!/usr/bin/env bash
# tests/run.sh: the whole test suite, twice: a plain optimized build (CUDA
# sources compiled too where the toolkit is, warnings as errors) and an
# AddressSanitizer + UBSan build. Ends with "N passed, N failed", counted
# from meson's testlog.json of both builds.
#   tests/run.sh              both builds
#   tests/run.sh plain|asan   one of them
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
