#!/usr/bin/env bash
# Provide a LibTorch 2.x from the PyPI `torch` wheel for CMake's find_package(Torch).
#
# Creates (or reuses) a virtual environment in a cache directory, installs the
# pinned torch wheel there, and prints what CMake needs on stdout:
#   CMAKE_ARG=<one extra argument for cmake>      (zero or more lines)
#   CMAKE_PREFIX_PATH=<torch package directory>   (always the last line)
# All progress and pip output goes to stderr, so stdout can be parsed.
#
# Usage:
#   out=$(tests/pypi_libtorch.sh)
#   mapfile -t args < <(sed -n 's/^CMAKE_ARG=//p' <<<"$out")
#   cmake -S . -B build-torch2 "-D$(tail -n1 <<<"$out")" "${args[@]}"
#
# Environment (all optional):
#   ACCELERATE_TORCH_VERSION  torch version to install (default below; must be >= 2.7)
#   ACCELERATE_TORCH_VARIANT  cpu (default): only the torch wheel plus the two small
#                             CUDA runtime wheels libtorch_cpu.so needs (~0.55 GB download);
#                             cuda: the full wheel set (~3 GB download, ~5.3 GB on disk)
#                             for a machine with a GPU
#   ACCELERATE_TORCH_VENV     virtual environment directory
#                             (default ${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/torch-venv[-cuda])
#   ACCELERATE_PYTHON         python interpreter to create the venv with
#
# Project-side contract for the CMAKE_ARG lines:
#   ACCELERATE_TORCH_CPU_ONLY=ON means libtorch_cuda.so's libraries are NOT installed:
#   link `torch_cpu_library c10` (plus ${TORCH_INCLUDE_DIRS} and ${TORCH_CXX_FLAGS})
#   instead of ${TORCH_LIBRARIES} / `torch`, which always pull in libtorch_cuda.so.
set -euo pipefail

# Pinned so builds are reproducible; 2.15.0 is checked to build and run here (CUDA 13.2 build).
readonly DEFAULT_TORCH_VERSION=2.15.0

log() { printf 'pypi_libtorch: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version=${ACCELERATE_TORCH_VERSION:-$DEFAULT_TORCH_VERSION}
variant=${ACCELERATE_TORCH_VARIANT:-cpu}

# Wheels before 2.7 use the old libstdc++ ABI (_GLIBCXX_USE_CXX11_ABI=0), which breaks
# std::string passing with Debian's C++ libraries (HDF5 C++, Debian's own libtorch).
if [[ ! $version =~ ^2\.([0-9]+)\.[0-9]+$ ]] || ((BASH_REMATCH[1] < 7)); then
  die "ACCELERATE_TORCH_VERSION='$version': need an exact version 2.MINOR.PATCH with MINOR >= 7"
fi
case $variant in
  cpu) suffix= ;;
  cuda) suffix=-cuda ;;
  *) die "ACCELERATE_TORCH_VARIANT='$variant': expected cpu or cuda" ;;
esac

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc
venv=${ACCELERATE_TORCH_VENV:-$cache_root/torch-venv$suffix}
mkdir -p "$(dirname "$venv")"

# Two builds (e.g. parallel CI jobs) must not install into the same venv at once.
exec 9>"$venv.lock"
flock 9

# Find an interpreter with a working venv module (Debian splits it into python3-venv).
has_venv() { "$1" -c 'import venv, ensurepip' >/dev/null 2>&1; }
pick_python() {
  local cand
  for cand in ${ACCELERATE_PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && has_venv "$cand"; then
      command -v "$cand"
      return 0
    fi
  done
  return 1
}

stamp="$venv/.accelerate-torch-stamp"
want="torch==$version variant=$variant"

if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
  log "reusing $venv ($want)"
else
  if ! python=$(pick_python); then
    # Only root can apt-get; someone else may hold the dpkg lock, so wait for it.
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
      log "installing python3-venv"
      apt-get -o DPkg::Lock::Timeout=900 install -y -qq python3-venv >&2 ||
        { apt-get -o DPkg::Lock::Timeout=900 update -qq >&2 &&
          apt-get -o DPkg::Lock::Timeout=900 install -y -qq python3-venv >&2; }
    fi
    python=$(pick_python) || die "no python3 with the venv module (install python3-venv)"
  fi

  # Start from a fresh venv so wheels of another torch version cannot linger;
  # delete only a directory that is a venv (ACCELERATE_TORCH_VENV may be mistyped).
  [[ ! -e $venv || -f $venv/pyvenv.cfg || -z $(ls -A "$venv") ]] || die "$venv exists and is not a venv; not deleting it"
  log "creating $venv with $python ($want)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # --no-cache-dir: the venv is the cache; a second copy of the wheels would double disk use.
  pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input --no-cache-dir)

  if [[ $variant == cuda ]]; then
    "${pip[@]}" install "torch==$version" >&2
  else
    # The linux x86_64 wheel on PyPI is always a CUDA build whose dependencies
    # (cuDNN, cuBLAS, NCCL, triton, ...) are ~2.5 GB; none is needed on the CPU.
    "${pip[@]}" install --no-deps "torch==$version" >&2
    # libtorch_cpu.so itself still has DT_NEEDED libcudart and libcupti; install
    # exactly the versions this torch pins (its RUNPATH looks in site-packages/nvidia).
    mapfile -t rt_reqs < <("$venv/bin/python" - <<'EOF'
import importlib.metadata as md, re
for r in md.requires("torch") or []:
    req, sep, marker = r.partition(";")
    name = re.match(r"\s*([A-Za-z0-9_.-]+)", req).group(1).lower().replace("_", "-")
    if name.startswith(("nvidia-cuda-runtime", "nvidia-cuda-cupti")):
        print(r)
    elif name == "cuda-toolkit":  # torch >= 2.10 pins CUDA wheels via this meta package
        print(re.sub(r"\[[^]]*\]", "[cudart,cupti]", req, count=1) + sep + marker)
EOF
)
    ((${#rt_reqs[@]})) || die "torch $version names no CUDA runtime wheels; check its metadata"
    log "runtime wheels: ${rt_reqs[*]}"
    # torch's Python deps are deliberately absent: silence pip's conflict report.
    "${pip[@]}" install --no-warn-conflicts "${rt_reqs[@]}" >&2
  fi
fi

# find_spec locates the package without importing it (import needs torch's Python deps).
torch_dir=$("$venv/bin/python" -c \
  'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')
[[ -f $torch_dir/share/cmake/Torch/TorchConfig.cmake ]] || die "no TorchConfig.cmake under $torch_dir"

# Every library we link must resolve (the wheels' RUNPATH finds site-packages/nvidia first).
check_lib=$torch_dir/lib/libtorch_cpu.so
[[ $variant == cuda ]] && check_lib=$torch_dir/lib/libtorch_cuda.so
if missing=$(ldd "$check_lib" | grep 'not found'); then
  die "unresolved libraries of $check_lib: $missing"
fi
[[ -f $stamp && $(<"$stamp") == "$want" ]] || printf '%s\n' "$want" >"$stamp"

# Caffe2Config.cmake runs public/cuda.cmake, which needs a CUDA toolkit (FATAL_ERROR
# without one) and, with CMake 3.25, fails on try_run in "CUDA20". It also puts the
# system toolkit's lib dir into -rpath, so ld resolves libnccl.so.2 against the system
# NCCL instead of the wheel's. cuda.cmake returns at once if torch::cudart exists,
# and the wheel's libraries find their CUDA libraries through their own RUNPATH.
include_file=$venv/accelerate_torch_project_include.cmake
cat >"$include_file.tmp" <<'EOF'
# Written by tests/pypi_libtorch.sh: skip Caffe2's CUDA toolkit discovery.
if(NOT TARGET torch::cudart)
  add_library(torch::cudart INTERFACE IMPORTED GLOBAL)
endif()
EOF
mv "$include_file.tmp" "$include_file"

cpu_only=ON
[[ $variant == cuda ]] && cpu_only=OFF

echo "CMAKE_ARG=-DCMAKE_PROJECT_INCLUDE=$include_file"
# TorchConfig finds libtorch/libc10 with find_library, whose PATHS come after the
# system dirs: with Debian's libtorch-dev installed it would pick libc10.so 1.13
# (crash at start-up). Pinning the cache variables also survives a reused build dir.
echo "CMAKE_ARG=-DTORCH_LIBRARY=$torch_dir/lib/libtorch.so"
echo "CMAKE_ARG=-Dc10_LIBRARY=$torch_dir/lib/libc10.so"
# Likewise a cached Torch_DIR/Caffe2_DIR (e.g. from a configure against Debian's) would win.
echo "CMAKE_ARG=-DTorch_DIR=$torch_dir/share/cmake/Torch"
echo "CMAKE_ARG=-DCaffe2_DIR=$torch_dir/share/cmake/Caffe2"
echo "CMAKE_ARG=-DACCELERATE_TORCH_CPU_ONLY=$cpu_only"
# The torch package dir (not torch.utils.cmake_prefix_path = <dir>/share/cmake):
# find_package still finds <dir>/share/cmake/Torch, and find_library searches <dir>/lib first.
echo "CMAKE_PREFIX_PATH=$torch_dir"
