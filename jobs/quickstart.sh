#!/usr/bin/env bash
# The main job, from a fresh machine: installs what is missing, builds the
# library and the example jobs, then runs on 2 ranks with mpirun:
#   1. accelerate-hpc env   (versions, features, one line per rank)
#   2. hello_state          (every rank reports its place in the job)
#
# usage: jobs/quickstart.sh [--np=N]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
np=2
for arg in "$@"; do
  case "$arg" in
    --np=*) np=${arg#--np=} ;;
    *) echo "quickstart.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

"$root/jobs/setup.sh"
build=$root/build
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target accelerate_cli hello_state

# Open MPI as root and with more ranks than cores needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

echo "== accelerate-hpc env on $np ranks"
mpirun -np "$np" "$build/src/accelerate-hpc" env
echo
echo "== hello_state on $np ranks"
mpirun -np "$np" "$build/jobs/hello_state/hello_state"
