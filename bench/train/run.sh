#!/usr/bin/env bash
# Data-parallel training throughput, 2 ranks x 1 thread: DistributedModel
# ("ours") against the no-communication ceiling (same per-rank compute, no
# collectives) and PyTorch's Python DistributedDataParallel with gloo, all in
# one run, ROUNDS times interleaved. Prints a table (medians) and writes
# OUTDIR/train.{json,md} and the raw runs in OUTDIR/train_runs.jsonl.
#
#   bench/train/run.sh OUTDIR [bench_train options for "ours"…]
#
# Environment:
#   BUILD_DIR   build tree holding bench/train/bench_train (default <repo>/build)
#   ROUNDS      repetitions (default 3)
#   WORKLOADS   default "W1 W2"
#   MPIEXEC     launcher (default mpirun)
#   PYTHON      interpreter with Debian's python3-torch (default /usr/bin/python3);
#               when torch is missing and we are root, python3-torch is installed
#               with apt-get (said so on the output)
#   TIME_LIMIT  seconds allowed per single run (default 300)
#   NP          ranks for every side (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/train/bench_train
mpiexec=${MPIEXEC:-mpirun}
python=${PYTHON:-/usr/bin/python3}
limit=${TIME_LIMIT:-300}
rounds=${ROUNDS:-3}
np=${NP:-2}
if [[ ! -x $exe ]]; then
  echo "run.sh: $exe not found. Build it first:" >&2
  echo "  cmake -S $repo -B $build && cmake --build $build -j2 --target bench_train" >&2
  exit 2
fi
mkdir -p "$outdir"
runs=$outdir/train_runs.jsonl
: >"$runs"

if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: PyTorch for $python is missing: installing Debian's python3-torch with apt-get (once)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch >/dev/null
  else
    echo "run.sh: $python cannot import torch; install python3-torch (apt-get install python3-torch)" >&2
    exit 2
  fi
fi

launcher_flags=()
if "$mpiexec" --version 2>/dev/null | grep -q 'Open MPI'; then
  launcher_flags+=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && launcher_flags+=(--allow-run-as-root)
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== machine =="
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "launcher: $("$mpiexec" --version 2>/dev/null | head -n 1)"
blas=$(update-alternatives --query "libblas.so.3-$(uname -m)-linux-gnu" 2>/dev/null | sed -n 's/^Value: //p' || true)
echo "BLAS alternative (libblas.so.3): ${blas:-unknown}"
echo "Python DDP peer: $("$python" -c 'import torch; print("PyTorch", torch.__version__, "gloo")')"
echo

run_ours() {  # workload mode [args…]
  local workload=$1 mode=$2
  shift 2
  timeout "$limit" "$mpiexec" -np "$np" "${launcher_flags[@]}" "$exe" --workload "$workload" --mode "$mode" "$@" |
    grep '^{' >>"$runs"
}

run_ddp() {  # workload
  local port=$((29500 + RANDOM % 1000)) pids=() status=0
  for ((rank = 0; rank < np; ++rank)); do
    RANK=$rank WORLD_SIZE=$np MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout "$limit" "$python" "$here/ddp_peer.py" --workload "$1" >"$outdir/.ddp_$rank.out" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  grep '^{' "$outdir/.ddp_0.out" >>"$runs" || status=1
  rm -f "$outdir"/.ddp_?.out
  return $status
}

status=0
for round in $(seq 1 "$rounds"); do
  for workload in ${WORKLOADS:-W1 W2}; do
    echo "round $round, $workload: ceiling, ours, python DDP"
    run_ours "$workload" ceiling || { echo "run.sh: ceiling run failed" >&2; status=1; }
    run_ours "$workload" ours "$@" || { echo "run.sh: our run failed" >&2; status=1; }
    run_ddp "$workload" || { echo "run.sh: Python DDP run failed" >&2; status=1; }
  done
done
echo
"$python" "$here/report.py" "$runs" "$outdir/train.json" "$outdir/train.md" || status=1
exit $status
