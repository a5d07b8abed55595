#!/usr/bin/env bash
# install.sh: install gradsync's Debian 12 packages and build it in ./build.
#   ./install.sh            packages + build
#   ./install.sh --deps     packages only, with what the test suite's
#                           peers need too (what .ci/run uses)
# Run as root (or with sudo). The CUDA parts build when nvcc is on PATH.
set -euo pipefail
cd "$(dirname "$0")"

pkgs=(build-essential meson ninja-build pkg-config libopenblas-dev libzmq3-dev
      libprotobuf-c-dev protobuf-c-compiler libjansson-dev python3 python3-numpy
      libxml2-utils)
# the test suite's peers and references: PyTorch (its SGD and training as
# the reference, Gloo, torchrun); clang and its libFuzzer runtime for the
# fuzz suite
[ "${1:-}" = "--deps" ] && pkgs+=(python3-torch clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "${1:-}" = "--deps" ] && exit 0

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build >/dev/null
echo "built: build/bench/bench"
