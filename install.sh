#!/usr/bin/env bash
# install.sh: install gradsync's Debian 12 packages, build it in ./build and
# install `bench` on PATH (meson install: /usr/local/bin/bench).
#   ./install.sh            packages + build + install
#   ./install.sh --deps     packages only, with what the test suite's
#                           peers need too (what .ci/run uses)
# Run as root (or with sudo). The CUDA parts build where the toolkit is
# (nvcc on PATH, or /usr/local/cuda); the build summary says what was found.
# Each step says what it does; a failing step shows its output and stops.
set -euo pipefail
cd "$(dirname "$0")"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

step() { printf '==> %s\n' "$*"; }
# run a quiet command, its output kept in $log; on failure show it and stop
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quiet() {
  if ! "$@" >"$log" 2>&1; then
    echo "install.sh: failed: $*" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
}

pkgs=(build-essential meson ninja-build pkg-config libopenblas-dev libzmq3-dev
      libprotobuf-c-dev protobuf-c-compiler libjansson-dev libsodium-dev python3 python3-numpy
      libxml2-utils)
# the test suite's peers and references: PyTorch (its SGD and training as
# the reference, Gloo, torchrun; torchvision for tools/profile_model.py
# and its tests); scikit-learn for its bundled 8x8 digits
# (tools/digits_idx.py, real data for the convergence tests); clang and its libFuzzer runtime for the
# fuzz suite; the launchers bench is tested under (Open MPI, MPICH, Slurm
# with munge); iproute2 and nftables for the fault tests (in private
# namespaces); Chromium to open report.html as a user would; util-linux's
# setpriv to run a rank as another user (the strangers tests); procps's ps
# to find a launcher's ranks; git for the revision mark's test (a clone)
[ "${1:-}" = "--deps" ] && pkgs+=(python3-torch python3-torchvision python3-sklearn clang libclang-rt-14-dev openmpi-bin mpich
                                 slurm-wlm munge iproute2 nftables chromium util-linux procps git)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${#missing[@]} Debian packages: ${missing[*]}"
  quiet $SUDO apt-get update
  quiet env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${missing[@]}"
else
  step "Debian packages: all present"
fi
[ "${1:-}" = "--deps" ] && exit 0

# the CUDA toolkit's usual home, when its nvcc is not on PATH
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if [ ! -f build/build.ninja ]; then
  step "configuring ./build (meson, release)"
  quiet meson setup build --buildtype=release
  sed -n '/GPU (--device cuda)/,/^$/p' "$log"
fi
step "building (ninja -C build)"
quiet ninja -C build
step "installing bench (meson install -C build)"
quiet $SUDO meson install -C build --no-rebuild
grep -m1 'Installing bench' "$log" || true
step "done: run \`bench\` (or build/bench/bench); \`bench --help\` lists every flag"
