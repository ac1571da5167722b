#!/usr/bin/env bash
# ZeRO sharding against DDP, NP ranks x 1 thread: bench_sharded's ddp,
# stage1 and stage2 (ShardedOptimizer), stage3 (FullyShardedModel) and
# PyTorch's Python DDP and ZeroRedundancyOptimizer (gloo), and, where a
# PyTorch 2.x with CPU FSDP is at hand (PYTHON2), its DDP and FSDP with
# SHARD_GRAD_OP and FULL_SHARD; same MLP, batch and Adam, ROUNDS times with the
# order of the sides rotated every round. Prints a table of medians and
# writes OUTDIR/sharded.{json,md} and the raw runs in OUTDIR/sharded_runs.jsonl.
#
#   bench/sharded/run.sh OUTDIR [options for every side: --width 4096 --layers 6 --batch 16 --steps 5]
#
# Environment:
#   BUILD_DIR   build tree holding bench/sharded/bench_sharded (default <repo>/build)
#   ROUNDS      repetitions (default 3)
#   NP          ranks for every side (default 2)
#   MPIEXEC     launcher (default mpirun)
#   PYTHON      interpreter with PyTorch (default /usr/bin/python3, Debian's python3-torch)
#   PYTHON2     interpreter with PyTorch 2.x for the FSDP peers (default: the full-wheel
#               venv of `ACCELERATE_TORCH_VARIANT=cuda tests/pypi_libtorch.sh`, if made)
#   TIME_LIMIT  seconds allowed per single run (default 600)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/sharded/bench_sharded
mpiexec=${MPIEXEC:-mpirun}
python=${PYTHON:-/usr/bin/python3}
python2=${PYTHON2:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/torch-venv-cuda/bin/python}
limit=${TIME_LIMIT:-600}
rounds=${ROUNDS:-3}
np=${NP:-2}
if [[ ! -x $exe ]]; then
  echo "run.sh: $exe not found. Build it first:" >&2
  echo "  cmake -S $repo -B $build && cmake --build $build -j2 --target bench_sharded" >&2
  exit 2
fi
if ! "$python" -c 'import torch.distributed.optim' 2>/dev/null; then
  echo "run.sh: $python cannot import torch; install python3-torch (apt-get install python3-torch)" >&2
  exit 2
fi
mkdir -p "$outdir"
runs=$outdir/sharded_runs.jsonl
: >"$runs"
launcher_flags=()
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
  launcher_flags+=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && launcher_flags+=(--allow-run-as-root)
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== machine =="
echo "cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
echo "cpu flags (vector): $(grep -o -w -E 'avx512[a-z_]*|avx2|fma|sse4_2|vpclmulqdq|pclmulqdq' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "launcher: $("$mpiexec" --version 2>/dev/null | head -n 1)"
echo "Python peers: $("$python" -c 'import torch; print("PyTorch", torch.__version__, "gloo")')"
if [[ -x $python2 ]] && "$python2" -c 'import torch.distributed.fsdp' 2>/dev/null; then
  echo "FSDP peers: $("$python2" -c 'import torch; print("PyTorch", torch.__version__, "gloo")')"
else
  python2=
  echo "FSDP peers: none (set PYTHON2, or make the venv once with ACCELERATE_TORCH_VARIANT=cuda tests/pypi_libtorch.sh)"
fi
echo

run() {  # impl mode
  local impl=$1 mode=$2
  if [[ $impl == ours ]]; then
    timeout "$limit" "$mpiexec" -np "$np" "${launcher_flags[@]}" "$exe" --mode "$mode" "${options[@]}" |
      grep '^{' >>"$runs"
    return
  fi
  local port=$((29500 + RANDOM % 1000)) pids=() status=0 interpreter=$python
  [[ $impl == pytorch2 ]] && interpreter=$python2
  for ((rank = 0; rank < np; ++rank)); do
    RANK=$rank WORLD_SIZE=$np MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout "$limit" "$interpreter" "$here/zero_peer.py" --mode "$mode" "${options[@]}" >"$outdir/.peer_$rank.out" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  # PyTorch 2.x's runs are labelled apart from Debian's 1.13.
  grep '^{' "$outdir/.peer_0.out" | sed "s/\"impl\": \"pytorch\"/\"impl\": \"$impl\"/" >>"$runs" || status=1
  rm -f "$outdir"/.peer_?.out
  return $status
}

options=("$@")
sides=("ours ddp" "ours stage1" "ours stage2" "ours stage3" "pytorch ddp" "pytorch zero1")
[[ -n $python2 ]] && sides+=("pytorch2 ddp" "pytorch2 fsdp_grad_op" "pytorch2 fsdp_full")
status=0
for round in $(seq 1 "$rounds"); do
  # Rotate: round r starts with side r, so no side always runs first or last.
  order=()
  for ((k = 0; k < ${#sides[@]}; ++k)); do order+=("${sides[$(((k + round - 1) % ${#sides[@]}))]}"); done
  echo "round $round: ${order[*]}"
  for side in "${order[@]}"; do
    # shellcheck disable=SC2086
    run $side || { echo "run.sh: $side failed" >&2; status=1; }
  done
done
echo
"$python" "$here/report.py" "$runs" "$outdir/sharded.json" "$outdir/sharded.md" || status=1
exit $status
