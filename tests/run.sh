#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs the
# whole ctest suite. Exits non-zero on any failure.
#
# usage: tests/run.sh [options] [-- extra ctest arguments]
#   --libtorch=debian|pypi  LibTorch to build against (default debian: libtorch-dev 1.13;
#                           pypi: a LibTorch 2.x from the PyPI torch wheel, in a cached venv)
#   --mpi=openmpi|mpich     MPI implementation (default openmpi)
#   --sanitize              AddressSanitizer + UndefinedBehaviorSanitizer build
#   --fast-build            compile everything at -O1 with line tables and leave out the
#                           benchmarks and the API docs (the variants CI runs for
#                           correctness: sanitizers, MPICH, LibTorch 2.x)
#   --line-tables           -O2 with line tables only (-g1) instead of full debug
#                           information: a third less compile time (CI's default variant)
#   --build-dir=DIR         build directory (default build[-<variant>] in the source tree)
#   --jobs=N                parallel build jobs (default: number of cores)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
libtorch=debian
mpi=openmpi
sanitize=0
fast_build=0
line_tables=0
build_dir=
jobs=$(nproc)
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --libtorch=debian|--libtorch=pypi) libtorch=${1#--libtorch=} ;;
    --mpi=openmpi|--mpi=mpich) mpi=${1#--mpi=} ;;
    --sanitize) sanitize=1 ;;
    --fast-build) fast_build=1 ;;
    --line-tables) line_tables=1 ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    --jobs=*) jobs=${1#--jobs=} ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "tests/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

"$root/jobs/setup.sh" --mpi="$mpi" --with-slurm

variant=
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "$libtorch" = pypi ]; then
  variant+=-pypi
  # The helper prints CMAKE_ARG=<flag> lines and, last, CMAKE_PREFIX_PATH=<dir>.
  while IFS= read -r line; do
    case "$line" in
      CMAKE_ARG=*) cmake_args+=("${line#CMAKE_ARG=}") ;;
      CMAKE_PREFIX_PATH=*) cmake_args+=("-DCMAKE_PREFIX_PATH=${line#CMAKE_PREFIX_PATH=}") ;;
    esac
  done < <("$root/tests/pypi_libtorch.sh")
fi
if [ "$mpi" = mpich ]; then
  variant+=-mpich
  # -DMPI_HOME does not select MPICH on Debian; the compiler wrappers do. The
  # HDF5 hint keeps CMake from linking Open MPI's HDF5 (two MPIs in one binary).
  cmake_args+=(-DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich
               -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich -DHDF5_C_COMPILER_EXECUTABLE=/usr/bin/h5pcc.mpich)
fi
if [ "$sanitize" = 1 ]; then
  variant+=-asan
  cmake_args+=(-DACCELERATE_SANITIZE=ON)
  # MPI and LibTorch keep allocations until exit by design; leaks are not
  # what this build looks for. Debian's Open MPI also trips ASan's ODR check.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:detect_odr_violation=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
if [ "$fast_build" = 1 ]; then
  # Half the compile time of -O2 -g; line tables keep sanitizer reports symbolised.
  cmake_args+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
               -DACCELERATE_BUILD_BENCH=OFF -DACCELERATE_BUILD_DOCS=OFF)
fi
if [ "$line_tables" = 1 ] && [ "$fast_build" = 0 ]; then
  cmake_args+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
fi
build_dir=${build_dir:-$root/build$variant}

# Open MPI refuses to run as root unless told; ranks may outnumber cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

cmake -S "$root" -B "$build_dir" "${cmake_args[@]}"
cmake --build "$build_dir" --parallel "$jobs"
cd "$build_dir"
ctest --output-on-failure --parallel "$jobs" --timeout 600 "${ctest_args[@]}"
