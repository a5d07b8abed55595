#!/usr/bin/env bash
# tests/gpu/bundle.sh: build gradsync for a GPU and pack a folder that runs
# on a GPU machine lacking ZeroMQ, protobuf-c, OpenBLAS, jansson and
# libsodium, without root: a machine with only an NVIDIA driver, cuBLAS and
# NCCL (a CUDA toolkit, or PyTorch's nvidia-* wheels).
#
#   tests/gpu/bundle.sh [DEST]        DEST defaults to ./gpu-bundle
#
# Env: GS_GPU_BUILD (the build folder, default build-gpu-bundle),
#      GS_GPU_ARCHS (SM architectures, default 90: H100/H200; e.g. "80 90").
#
# What DEST holds, laid out as the build tree is (so the programs find the
# CUDA module next to them, kernels/cuda_loader.h):
#   bench/bench, libgs_cuda.so, tests/gpu/{test_cuda_kernels,test_nccl,
#   gemm_bench,npycmp}, bench/peers/*.py (the PyTorch peers)
#   lib/     every shared library those need (ldd), except the C library
#            family, libstdc++/libgcc_s (every Linux has newer ones) and
#            cuBLAS/NCCL (hundreds of MB: the run script finds the
#            machine's); cudart is carried, it is the module's own. The
#            programs find lib/ through their DT_RPATH ($ORIGIN/../lib and
#            so on, linked in; an RPATH, unlike a RUNPATH, also serves the
#            libraries' own dependencies and the module's dlopen), not
#            LD_LIBRARY_PATH, so programs started beside them (python3
#            with PyTorch) never see the bundle's libraries
#   tools/   ip and tc from iproute2 with their libraries, for emulated
#            hosts where the machine has none (wrappers, used only then)
#   run      run a program of the bundle: `DEST/run bench --device cuda ...`
#   env.sh   the same settings for a shell: `. DEST/env.sh`
# run/env.sh look for libcublas.so.13, libcublasLt.so.13 and libnccl.so.2
# in $GS_CUDA_LIBS (a colon list), then under Python's nvidia-* packages
# (python3 -c 'import nvidia'), then /usr/local/cuda*/lib64 and ldconfig,
# put only those folders on LD_LIBRARY_PATH, and say what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-gpu-bundle}
BUILD=${GS_GPU_BUILD:-build-gpu-bundle}
ARCHS=${GS_GPU_ARCHS:-90}

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null || { echo "bundle.sh: no nvcc (install the CUDA toolkit)" >&2; exit 1; }

archs=$(printf "'%s'," $ARCHS)
rpath='-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib:$ORIGIN/../lib:$ORIGIN/../../lib'
if [ ! -f "$BUILD/build.ninja" ]; then
  echo "==> meson setup $BUILD (CUDA + NCCL, archs $ARCHS, release)"
  meson setup "$BUILD" -Dcuda=enabled -Dnccl=enabled "-Dgpu_archs=[${archs%,}]" \
    --buildtype=release "-Dc_link_args=$rpath" >"$BUILD.setup.log" 2>&1 ||
    { cat "$BUILD.setup.log"; exit 1; }
else
  meson configure "$BUILD" "-Dgpu_archs=[${archs%,}]" "-Dc_link_args=$rpath" >/dev/null
fi
echo "==> ninja -C $BUILD"
ninja -C "$BUILD" >"$BUILD.ninja.log" 2>&1 || { tail -n 40 "$BUILD.ninja.log"; exit 1; }

rm -rf "$DEST"
mkdir -p "$DEST/lib" "$DEST/tools/bin" "$DEST/tools/lib" "$DEST/bench/peers" "$DEST/tests/gpu"
progs=(bench/bench tests/gpu/test_cuda_kernels tests/gpu/test_nccl tests/gpu/gemm_bench
       tests/gpu/npycmp)
for p in "${progs[@]}"; do cp "$BUILD/$p" "$DEST/$p"; done
cp "$BUILD/libgs_cuda.so" "$DEST/"
cp bench/peers/*.py "$DEST/bench/peers/"

# libraries every Linux has, or that the machine's CUDA provides
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libnccl|libcuda)\.so'
copy_libs() { # dest, files...
  local dest=$1; shift
  ldd "$@" 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$dest/$name"
  done
}
copy_libs "$DEST/lib" "$DEST/libgs_cuda.so" "${progs[@]/#/$DEST/}"
for t in ip tc; do
  p=$(PATH=/usr/sbin:/sbin:$PATH command -v $t || true)
  [ -n "$p" ] || continue
  cp "$p" "$DEST/tools/bin/"
  copy_libs "$DEST/tools/lib" "$p"
  printf '#!/bin/sh\nd=$(dirname "$0")\nLD_LIBRARY_PATH=$d/lib exec "$d/bin/%s" "$@"\n' "$t" \
    >"$DEST/tools/$t"
  chmod +x "$DEST/tools/$t"
done
strip --strip-unneeded "$DEST"/lib/*.so* "$DEST"/tools/lib/*.so* 2>/dev/null || true

cat >"$DEST/env.sh" <<'ENV'
# env.sh: source this (. gpu-bundle/env.sh) to run the bundle's programs:
# the bundle's libraries, then the machine's cuBLAS and NCCL.
_gs_here=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
_gs_find() { # a library's folder: $GS_CUDA_LIBS, Python's nvidia-*, CUDA, ldconfig
  local name=$1 d py
  for d in ${GS_CUDA_LIBS:+${GS_CUDA_LIBS//:/ }}; do [ -e "$d/$name" ] && { echo "$d"; return; }; done
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    d=$("$py" -c 'import nvidia, sys; print(" ".join(nvidia.__path__))' 2>/dev/null) || continue
    d=$(find $d -name "$name" 2>/dev/null | head -n 1)
    [ -n "$d" ] && { dirname "$d"; return; }
  done
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
           /usr/local/cuda-*/targets/x86_64-linux/lib; do
    [ -e "$d/$name" ] && { echo "$d"; return; }
  done
  d=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
  [ -n "$d" ] && dirname "$d"
}
_gs_path=
for _gs_lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  _gs_dir=$(_gs_find "$_gs_lib")
  if [ -n "$_gs_dir" ]; then
    case ":$_gs_path:" in *":$_gs_dir:"*) ;; *) _gs_path=$_gs_path${_gs_path:+:}$_gs_dir ;; esac
    [ -n "${GS_BUNDLE_VERBOSE:-}" ] && echo "gpu-bundle: $_gs_lib in $_gs_dir" >&2
  else
    echo "gpu-bundle: $_gs_lib not found (set GS_CUDA_LIBS to its folder);" \
         "--device cuda will say what it cannot load" >&2
  fi
done
[ -n "$_gs_path" ] && export LD_LIBRARY_PATH=$_gs_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GS_CUDA_MODULE=$_gs_here/libgs_cuda.so
# iproute2 for emulated hosts only where the machine has none (bench looks
# in /usr/sbin:/sbin:/usr/bin:/bin first, then PATH)
export PATH=$_gs_here/bench:$PATH:$_gs_here/tools
unset _gs_here _gs_path _gs_lib _gs_dir
ENV
cat >"$DEST/run" <<'RUN'
#!/usr/bin/env bash
# run: a program of this bundle with its libraries: run bench ..., run
# tests/gpu/test_cuda_kernels, or any command (python3 ...).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
[ $# -gt 0 ] || { echo "usage: $0 bench|PROGRAM [args...]" >&2; exit 2; }
if [ -x "$here/$1" ] && [ -f "$here/$1" ]; then p=$here/$1; shift; exec "$p" "$@"; fi
if [ -x "$here/bench/$1" ] && [ -f "$here/bench/$1" ]; then p=$here/bench/$1; shift; exec "$p" "$@"; fi
exec "$@"
RUN
chmod +x "$DEST/run"
{
  # the bundled bench's own mark (tools/git_revision.py at its build, +dirty:
  # uncommitted changes), as its --version says
  rev=$(sed -n 's/^const char gs_git_revision\[\] = "\(.*\)";$/\1/p' "$BUILD/bench/version.c" 2>/dev/null)
  echo "gradsync git ${rev:-unknown}, built $(date -u +%FT%TZ) on $(uname -srm)"
  echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1); archs: $ARCHS"
} >"$DEST/BUILD-INFO"
echo "==> $DEST: $(du -sh "$DEST" | cut -f1) ($(ls "$DEST/lib" | wc -l) libraries carried)"
echo "    on the GPU machine: $DEST/run bench --device cuda --mode ring --world 1"
