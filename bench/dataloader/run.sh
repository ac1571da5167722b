#!/usr/bin/env bash
# Runs bench_dataloader at 1 and 2 ranks with 0 and 2 workers and writes
# dataloader_npN_wW.{json,txt} into OUTDIR.
#
#   bench/dataloader/run.sh OUTDIR [bench_dataloader options…]
#
# Environment: BUILD_DIR (default <repo>/build), RANKS (default "1 2"),
# WORKERS (default "0 2"), MPIEXEC (default mpirun).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
exe=${BUILD_DIR:-$repo/build}/bench/dataloader/bench_dataloader
mpiexec=${MPIEXEC:-mpirun}
[[ -x $exe ]] || { echo "run.sh: $exe not found; build the bench_dataloader target first" >&2; exit 2; }
mkdir -p "$outdir"
flags=()
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
  flags+=(--oversubscribe)
  [[ $(id -u) == 0 ]] && flags+=(--allow-run-as-root)
fi
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in ${RANKS:-1 2}; do
  for w in ${WORKERS:-0 2}; do
    base=$outdir/dataloader_np${n}_w$w
    command=("$mpiexec" -np "$n" "${flags[@]}" -x OMP_NUM_THREADS=1 "$exe" --workers "$w" --json "$base.json" "$@")
    echo "\$ ${command[*]}"
    "${command[@]}" | tee "$base.txt"
  done
done
