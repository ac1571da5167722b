#!/usr/bin/env bash
# The Spack recipe installed for real, offline: Spack 1.x builds this checkout
# against the system's packages declared as externals (Debian's Open MPI,
# HDF5, hwloc, LibTorch as an external py-torch, ...), then the installed
# package is used the three ways docs/install.md describes: the generated
# Tcl module (or `spack load` where no `module` command exists), a
# find_package consumer, and `spack test run`.
#
# usage: spack_install_test.sh <source dir>
#
# Spack is not part of the build's dependencies, so the test looks for it and
# skips (exit 77) with the reason where it cannot run:
#   ACCELERATE_SPACK           a Spack 1.x checkout (else `spack` on PATH)
#   ACCELERATE_SPACK_PACKAGES  a spack-packages checkout (its builtin recipes)
#   SPACK_PYTHON               a Python with the `clingo` module (the solver)
#   ACCELERATE_SPACK_WORK      optional: a directory kept for a rerun
# Everything Spack writes (configuration, caches, the install tree) stays in
# a temporary directory, and the user's own Spack configuration is ignored.
set -euo pipefail
source_dir=$(cd "$1" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ -n "${ACCELERATE_SPACK:-}" ]; then
  spack_bin=$ACCELERATE_SPACK/bin/spack
  [ -x "$spack_bin" ] || skip "ACCELERATE_SPACK=$ACCELERATE_SPACK has no bin/spack"
elif command -v spack >/dev/null; then
  spack_bin=$(command -v spack)
else
  skip "no Spack: set ACCELERATE_SPACK to a Spack 1.x checkout (docs/install.md, 'Offline install test')"
fi
packages_repo=${ACCELERATE_SPACK_PACKAGES:-}
[ -n "$packages_repo" ] || skip "ACCELERATE_SPACK_PACKAGES (a spack-packages checkout) is not set"
builtin_repo=$packages_repo/repos/spack_repo/builtin
[ -f "$builtin_repo/repo.yaml" ] || skip "$packages_repo holds no repos/spack_repo/builtin"
"${SPACK_PYTHON:-python3}" -c "import clingo" 2>/dev/null ||
  skip "the Python Spack runs (${SPACK_PYTHON:-python3}) has no clingo module: set SPACK_PYTHON"
command -v dpkg-query >/dev/null || skip "the externals are read from dpkg: not a Debian system"
command -v mpiexec >/dev/null || skip "no mpiexec on PATH"

# ACCELERATE_SPACK_WORK keeps the directory (and its install tree) for a rerun.
if [ -n "${ACCELERATE_SPACK_WORK:-}" ]; then
  work=$ACCELERATE_SPACK_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_spack.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
export SPACK_DISABLE_LOCAL_CONFIG=1
export SPACK_USER_CONFIG_PATH=$work/user SPACK_USER_CACHE_PATH=$work/cache
spack() { "$spack_bin" "$@"; }
env_dir=$work/env

# A Debian package's version as Spack writes it: 1.10.8+repack1-1 -> 1.10.8.
deb_version() {
  local v
  v=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null) || fail "Debian package $1 is not installed"
  v=${v#*:}
  echo "${v%%[-+~]*}"
}
external() {  # <spack package> <spec suffix> <prefix>
  printf '    %s:\n      buildable: false\n      externals:\n      - spec: %s\n        prefix: %s\n' \
    "$1" "$2" "$3"
}

# `spack develop` builds inside the source tree (build-<arch>-<hash>/): build a
# copy of the checkout, its build folders and git data left out, not the checkout.
source_copy=$work/source
rm -rf "$source_copy"
mkdir -p "$source_copy" "$env_dir"
tar -C "$source_dir" --exclude-vcs --exclude='./build*' --exclude='./.cache' -cf - . | tar -C "$source_copy" -xf -

{
  cat <<EOF
spack:
  specs:
  - accelerate-hpc@main +hdf5 +hwloc +isal +tensorboard ~cuda ~nccl ~kokkos
  repos:
    accelerate: $source_copy/spack
    builtin: $builtin_repo
  develop:
    accelerate-hpc:
      spec: accelerate-hpc@=main
      path: $source_copy
  config:
    install_tree:
      root: $work/opt
    build_stage: [$work/stage]
    test_stage: $work/test-stage
    build_jobs: $(nproc)
  bootstrap:
    enable: false
  concretizer:
    unify: true
    reuse: false
  modules:
    default:
      roots:
        tcl: $work/modules
      enable: [tcl]
      tcl:
        hash_length: 0
        projections:
          all: '{name}/{version}'
        all:
          autoload: none   # every dependency is an external in /usr, with no module
  packages:
    mpi:
      require: openmpi
    gcc:
      buildable: false
      externals:
      - spec: gcc@$(gcc -dumpfullversion) languages:='c,c++'
        prefix: /usr
        extra_attributes:
          compilers:
            c: $(command -v gcc)
            cxx: $(command -v g++)
EOF
  external openmpi "openmpi@$(deb_version libopenmpi-dev)" /usr
  external hdf5 "hdf5@$(deb_version libhdf5-openmpi-dev)+mpi+hl api=v110" /usr
  external hwloc "hwloc@$(deb_version libhwloc-dev)" /usr
  external cmake "cmake@$(deb_version cmake)" /usr
  external gmake "gmake@$(deb_version make)" /usr
  external nlohmann-json "nlohmann-json@$(deb_version nlohmann-json3-dev)" /usr
  external cli11 "cli11@$(deb_version libcli11-dev)" /usr
  external yaml-cpp "yaml-cpp@$(deb_version libyaml-cpp-dev)" /usr
  external fmt "fmt@$(deb_version libfmt-dev)" /usr
  external isa-l "isa-l@$(deb_version libisal-dev)" /usr
  external protobuf "protobuf@$(deb_version libprotobuf-dev)" /usr
  external googletest "googletest@$(deb_version libgtest-dev)" /usr
  # Spack attaches a Python to an external py-torch: the system's own.
  external python "python@$(python3 -c 'import platform; print(platform.python_version())')" /usr
  external py-torch "py-torch@$(deb_version libtorch-dev)~cuda" /usr
} >"$env_dir/spack.yaml"

step() { echo "== $*"; }
step "concretize"
spack -e "$env_dir" concretize -f || fail "spack concretize failed (environment: $env_dir/spack.yaml)"
step "install"
spack -e "$env_dir" install --fail-fast || fail "spack install failed"
prefix=$(spack -e "$env_dir" location -i accelerate-hpc)
[ -x "$prefix/bin/accelerate-hpc" ] || fail "no bin/accelerate-hpc under $prefix"
[ -f "$prefix/lib/cmake/AccelerateHPC/AccelerateHPCConfig.cmake" ] ||
  [ -f "$prefix/lib64/cmake/AccelerateHPC/AccelerateHPCConfig.cmake" ] || fail "no CMake package under $prefix"

step "module"
spack -e "$env_dir" module tcl refresh -y >/dev/null || fail "spack module tcl refresh failed"
modulefile=$(find "$work/modules" -path '*/accelerate-hpc/main' -print -quit)
[ -n "$modulefile" ] && [ -f "$modulefile" ] || fail "no Tcl module file accelerate-hpc/main under $work/modules"
grep -q "$prefix/bin" "$modulefile" || fail "the module file does not put $prefix/bin on PATH"

# In a clean shell: the module (or spack load) alone must make the package usable.
use_package=""
if [ -f /usr/share/modules/init/bash ]; then
  use_package="source /usr/share/modules/init/bash && module use $(dirname "$(dirname "$modulefile")") && module load accelerate-hpc/main"
  echo "using the Tcl module through Environment Modules"
else
  use_package="eval \"\$('$spack_bin' -e '$env_dir' load --sh accelerate-hpc)\""
  echo "no Environment Modules here: using spack load"
fi
mpi_flags=()
[ "$(id -u)" -eq 0 ] && mpi_flags=(--allow-run-as-root --oversubscribe)

step "accelerate-hpc env at 2 ranks"
out=$(env -i HOME="$work" PATH=/usr/bin:/bin bash -c "$use_package && command -v accelerate-hpc && \
  timeout 120 mpiexec ${mpi_flags[*]} -n 2 accelerate-hpc env") || fail "accelerate-hpc env failed: $out"
echo "$out"
grep -q "^$prefix/bin/accelerate-hpc$" <<<"$out" || fail "the module did not put the installed accelerate-hpc first"
grep -q "Layout: *2 process(es)" <<<"$out" || fail "accelerate-hpc env does not report 2 processes"

step "find_package consumer"
consumer=$work/consumer
mkdir -p "$consumer"
cp "$source_dir/spack/packages/accelerate-hpc/test/CMakeLists.txt" \
  "$source_dir/spack/packages/accelerate-hpc/test/smoke.cpp" "$consumer/"
env -i HOME="$work" PATH=/usr/bin:/bin bash -c "$use_package && \
  cmake -S '$consumer' -B '$consumer/build' -DCMAKE_BUILD_TYPE=Release >'$work/consumer.log' 2>&1 && \
  cmake --build '$consumer/build' -j '$(nproc)' >>'$work/consumer.log' 2>&1" ||
  { cat "$work/consumer.log"; fail "the find_package consumer did not build with the module loaded"; }
consumer_exe=$(find "$consumer/build" -maxdepth 1 -type f -executable -print -quit)
[ -n "$consumer_exe" ] || fail "the consumer build produced no executable"
out=$(env -i HOME="$work" PATH=/usr/bin:/bin bash -c "$use_package && \
  timeout 120 mpiexec ${mpi_flags[*]} -n 2 '$consumer_exe' 2") || fail "the consumer failed at 2 ranks: $out"
echo "$out"
for rank in 0 1; do
  grep -q "smoke: rank $rank/2 sum 3 ok" <<<"$out" || fail "the consumer's rank $rank did not all-reduce correctly"
done

step "spack test run"
spack -e "$env_dir" test run accelerate-hpc || { spack -e "$env_dir" test results -l || true; fail "spack test run failed"; }
results=$(spack -e "$env_dir" test results -l)
echo "$results"
grep -q "PASSED" <<<"$results" || fail "spack test results show no PASSED"
! grep -q "FAILED" <<<"$results" || fail "spack test results show a failure"
echo "PASS"
