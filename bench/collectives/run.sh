#!/usr/bin/env bash
# Runs bench_collectives at 2 and 4 ranks, prints the tables and writes, per
# rank count N, collectives_npN.{json,md,txt} into OUTDIR.
#
#   bench/collectives/run.sh OUTDIR [bench_collectives options…]
#
# Environment:
#   BUILD_DIR      build tree holding bench/collectives/bench_collectives
#                  (default: <repo>/build)
#   RANKS          rank counts to run (default "2 4")
#   MPIEXEC        launcher (default mpirun)
#   TIME_LIMIT     seconds allowed per rank count before the run is killed (default 170)
#
# With Open MPI, more ranks than cores need --oversubscribe (added here), and
# root needs --allow-run-as-root (added when running as root).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/collectives/bench_collectives
mpiexec=${MPIEXEC:-mpirun}
limit=${TIME_LIMIT:-170}
if [[ ! -x $exe ]]; then
  echo "run.sh: $exe not found. Build it first:" >&2
  echo "  cmake -S $repo -B $build && cmake --build $build -j --target bench_collectives" >&2
  exit 2
fi
mkdir -p "$outdir"

launcher_flags=()
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
  launcher_flags+=(--oversubscribe)
  [[ $(id -u) == 0 ]] && launcher_flags+=(--allow-run-as-root)
fi

echo "== machine =="
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "launcher: $("$mpiexec" --version 2>/dev/null | head -n 1)"
if command -v update-alternatives >/dev/null; then
  blas=$(update-alternatives --query "libblas.so.3-$(uname -m)-linux-gnu" 2>/dev/null | sed -n 's/^Value: //p')
  echo "BLAS alternative (libblas.so.3): ${blas:-unknown}"
fi
echo

status=0
for n in ${RANKS:-2 4}; do
  base=$outdir/collectives_np$n
  command=("$mpiexec" -np "$n" "${launcher_flags[@]}" "$exe" --json "$base.json" --markdown "$base.md" "$@")
  echo "\$ ${command[*]}"
  start=$SECONDS
  if ! timeout "$limit" "${command[@]}" | tee "$base.txt"; then
    echo "run.sh: the $n-rank run failed or exceeded ${limit} s" >&2
    status=1
  fi
  echo "($n ranks: $((SECONDS - start)) s; JSON in $base.json)"
  echo
done
exit $status
