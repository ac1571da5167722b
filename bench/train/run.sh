#!/usr/bin/env bash
# Data-parallel training throughput, 2 ranks x 1 thread: DistributedModel
# ("ours") against the no-communication ceiling (same per-rank compute, no
# collectives), the same ceiling with a barrier after each step, and PyTorch's Python DistributedDataParallel with gloo -
# Debian's 1.13 and, where it is installed, a current 2.x - each also with
# its own ceiling, all in one run, ROUNDS times, the order of the sides
# rotating from round to round. Prints a table (medians) and writes
# OUTDIR/train.{json,md} and the raw runs in OUTDIR/train_runs.jsonl.
#
#   bench/train/run.sh OUTDIR [bench_train options for "ours"…]
#
# Environment:
#   BUILD_DIR   build tree holding bench/train/bench_train (default <repo>/build)
#   ROUNDS      repetitions (default 3)
#   WORKLOADS   default "W1 W2"; "GPT" is jobs/gpt's transformer with AdamW
#   BATCH       samples per rank on every side (default 64; 8 is the GPT's usual)
#   MIXED_PRECISION  no (default) or bf16: every side's forward and loss under CPU autocast
#   PYTHON_ACCELERATE  interpreter with Hugging Face Accelerate over Debian's PyTorch, for the
#               "hf_accelerate" side (default: the venv tests/python_venv.sh makes for the
#               tests, hf-accelerate; "none" skips it)
#   MPIEXEC     launcher (default mpirun)
#   PYTHON      interpreter with Debian's python3-torch (default /usr/bin/python3);
#               when torch is missing and we are root, python3-torch is installed
#               with apt-get (said so on the output)
#   PYTHON2     interpreter with a PyTorch 2.x that imports in Python (default:
#               the full-wheel venv of `ACCELERATE_TORCH_VARIANT=cuda
#               tests/pypi_libtorch.sh`, when it exists; "none" skips it)
#   TIME_LIMIT  seconds allowed per single run (default 300)
#   NP          ranks for every side (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/train/bench_train
mpiexec=${MPIEXEC:-mpirun}
python=${PYTHON:-/usr/bin/python3}
python2=${PYTHON2:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/torch-venv-cuda/bin/python}
if [[ $python2 == none || ! -x $python2 ]] || ! "$python2" -c 'import torch.distributed' 2>/dev/null; then
  python2=
fi
python_accelerate=${PYTHON_ACCELERATE:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/hf-accelerate-venv/bin/python}
if [[ $python_accelerate == none || ! -x $python_accelerate ]] || ! "$python_accelerate" -c 'import accelerate' 2>/dev/null; then
  python_accelerate=
fi
mixed_precision=${MIXED_PRECISION:-no}
batch=${BATCH:-64}
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
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
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
if [[ -n $python2 ]]; then
  echo "Python DDP peer (2.x): $("$python2" -c 'import torch; print("PyTorch", torch.__version__, "gloo")')"
else
  echo "Python DDP peer (2.x): none (set PYTHON2, or make the venv once with ACCELERATE_TORCH_VARIANT=cuda tests/pypi_libtorch.sh)"
fi
if [[ -n $python_accelerate ]]; then
  echo "Hugging Face Accelerate peer: $("$python_accelerate" -c 'import torch, accelerate; print("Accelerate", accelerate.__version__, "on PyTorch", torch.__version__)')"
else
  echo "Hugging Face Accelerate peer: none (set PYTHON_ACCELERATE)"
fi
echo "mixed precision: $mixed_precision, ranks: $np, batch per rank: $batch"
echo

run_ours() {  # workload mode [args…]
  local workload=$1 mode=$2
  shift 2
  timeout "$limit" "$mpiexec" -np "$np" "${launcher_flags[@]}" "$exe" --workload "$workload" --mode "$mode" \
    --mixed-precision "$mixed_precision" --batch "$batch" "$@" |
    grep '^{' >>"$runs"
}

run_ddp() {  # interpreter name workload [--ceiling]
  local interpreter=$1 name=$2 workload=$3
  shift 3
  local port=$((29500 + RANDOM % 1000)) pids=() status=0
  for ((rank = 0; rank < np; ++rank)); do
    PYTHONWARNINGS=ignore RANK=$rank WORLD_SIZE=$np MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout "$limit" "$interpreter" "$here/ddp_peer.py" --workload "$workload" --name "$name" \
      --mixed-precision "$mixed_precision" --batch "$batch" "$@" \
      >"$outdir/.ddp_$rank.out" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  grep '^{' "$outdir/.ddp_0.out" >>"$runs" || status=1
  rm -f "$outdir"/.ddp_?.out
  return $status
}

# One side: a name for the log, then the command.
side() {  # side workload [our options…]
  local workload=$2
  case $1 in
    ceiling) run_ours "$workload" ceiling ;;
    synced_ceiling) run_ours "$workload" synced_ceiling ;;
    ours) shift 2; run_ours "$workload" ours "$@" ;;
    ddp) run_ddp "$python" python_ddp "$workload" ;;
    ddp_ceiling) run_ddp "$python" python_ddp "$workload" --ceiling ;;
    ddp2) run_ddp "$python2" python2_ddp "$workload" ;;
    ddp2_ceiling) run_ddp "$python2" python2_ddp "$workload" --ceiling ;;
    hf_accelerate) run_ddp "$python_accelerate" hf_accelerate "$workload" --accelerate ;;
  esac
}

sides=(ceiling synced_ceiling ours ddp ddp_ceiling)
[[ -n $python2 ]] && sides+=(ddp2 ddp2_ceiling)
[[ -n $python_accelerate ]] && sides+=(hf_accelerate)
status=0
for round in $(seq 1 "$rounds"); do
  for workload in ${WORKLOADS:-W1 W2}; do
    # Rotate: each side runs first in some round, so none always runs on
    # the machine as the one before it left it.
    order=()
    for ((k = 0; k < ${#sides[@]}; ++k)); do order+=("${sides[(k + round - 1) % ${#sides[@]}]}"); done
    echo "round $round, $workload: ${order[*]}"
    for name in "${order[@]}"; do
      side "$name" "$workload" "$@" || { echo "run.sh: the $name run failed" >&2; status=1; }
    done
  done
done
echo
"$python" "$here/report.py" "$runs" "$outdir/train.json" "$outdir/train.md" || status=1
exit $status
