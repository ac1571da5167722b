#!/usr/bin/env bash
# Step time of FusedAdamW against torch::optim::AdamW (and AdamW over one
# flat tensor, a diagnostic) over a GPT-like model's parameters, at each
# intra-op thread count of THREADS; rounds rotate the sides' order, medians
# are reported. Writes OUTDIR/optimizer_<threads>.json.
#
#   bench/optimizer/run.sh [OUTDIR] [bench_optimizer options…]
#
# Environment:
#   BUILD_DIR   build tree holding bench/optimizer/bench_optimizer (default <repo>/build)
#   THREADS     intra-op thread counts (default "1 <cores>")
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/optimizer/bench_optimizer
outdir=${1:-$build/bench/optimizer}
[[ $# -gt 0 ]] && shift
if [[ ! -x $exe ]]; then
  echo "run.sh: $exe not found. Build it first (benchmarks need -DACCELERATE_BUILD_BENCH=ON):" >&2
  echo "  cmake -S $repo -B $build -DCMAKE_BUILD_TYPE=Release -DACCELERATE_BUILD_BENCH=ON" >&2
  echo "  cmake --build $build -j2 --target bench_optimizer" >&2
  exit 2
fi
mkdir -p "$outdir"
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for threads in ${THREADS:-1 $(nproc)}; do
  echo
  echo "== $threads thread(s) =="
  OMP_NUM_THREADS=$threads "$exe" --threads "$threads" --json "$outdir/optimizer_$threads.json" "$@" || status=1
done
exit $status
