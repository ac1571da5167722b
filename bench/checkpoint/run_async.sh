#!/usr/bin/env bash
# save_state beside a training loop: bench_async_save's synchronous and
# asynchronous saves, each also with two tiers (the local tier on the same
# disk), against PyTorch 2.x's dcp.save and dcp.async_save (gloo, CPU) on the
# same MLP with Adam, NP ranks x 1 thread, ROUNDS times with the order of the
# sides rotated every round. Prints a table of medians and writes
# OUTDIR/async_runs.jsonl.
#
#   bench/checkpoint/run_async.sh OUTDIR [options for every side: --width 2048 --layers 8 --batch 8 --saves 3 --steps 8]
#
# Environment:
#   BUILD_DIR   build tree holding bench/checkpoint/bench_async_save (default <repo>/build)
#   ROUNDS      repetitions (default 3)
#   NP          ranks for every side (default 2)
#   SCRATCH     where the checkpoints go (default ${TMPDIR:-/tmp}); removed after each run
#   MPIEXEC     launcher (default mpirun)
#   PYTHON2     interpreter with PyTorch 2.x (default: the full-wheel venv of
#               `ACCELERATE_TORCH_VARIANT=cuda tests/pypi_libtorch.sh`; without it, ours only)
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
exe=$build/bench/checkpoint/bench_async_save
mpiexec=${MPIEXEC:-mpirun}
python2=${PYTHON2:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/torch-venv-cuda/bin/python}
rounds=${ROUNDS:-3}
np=${NP:-2}
scratch=${SCRATCH:-${TMPDIR:-/tmp}}/accelerate_bench_async.$$
if [[ ! -x $exe ]]; then
  echo "run_async.sh: $exe not found. Build it first:" >&2
  echo "  cmake -S $repo -B $build -DACCELERATE_BUILD_BENCH=ON && cmake --build $build -j2 --target bench_async_save" >&2
  exit 2
fi
mkdir -p "$outdir"
runs=$outdir/async_runs.jsonl
: >"$runs"
trap 'rm -rf "$scratch"' EXIT
launcher_flags=()
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
  launcher_flags+=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && launcher_flags+=(--allow-run-as-root)
fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== machine =="
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "cpu flags (vector): $(grep -o -w -E 'avx512[a-z_]*|avx2|fma|sse4_2|vpclmulqdq|pclmulqdq' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "cores online: $(nproc --all), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "file system of the checkpoints: $(df -T "$(dirname "$scratch")" | awk 'NR == 2 { print $2 }')"
echo "launcher: $("$mpiexec" --version 2>/dev/null | head -n 1)"
sides=("ours sync" "ours async" "ours sync_tiers" "ours async_tiers")
if [[ -x $python2 ]] && "$python2" -c 'import numpy, torch.distributed.checkpoint as d; d.async_save' 2>/dev/null; then
  echo "peer: $("$python2" -c 'import torch; print("PyTorch", torch.__version__, "gloo")')"
  sides+=("dcp sync" "dcp async")
else
  echo "peer: none (set PYTHON2, or make the venv once with ACCELERATE_TORCH_VARIANT=cuda tests/pypi_libtorch.sh;"
  echo "      DCP needs NumPy there too: <venv>/bin/pip install numpy)"
fi
echo

run() {  # impl mode
  local impl=$1 mode=$2 status=0
  mkdir -p "$scratch"
  if [[ $impl == ours ]]; then
    timeout 900 "$mpiexec" -np "$np" "${launcher_flags[@]}" "$exe" --mode "$mode" --dir "$scratch" "${options[@]}" |
      grep '^{' >>"$runs" || status=1
  else
    local port=$((29500 + RANDOM % 1000)) pids=()
    for ((rank = 0; rank < np; ++rank)); do
      RANK=$rank WORLD_SIZE=$np MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 900 "$python2" "$here/dcp_peer.py" --mode "$mode" --dir "$scratch" "${options[@]}" \
        >"$outdir/.peer_$rank.out" 2>"$outdir/.peer_$rank.err" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    grep '^{' "$outdir/.peer_0.out" >>"$runs" || { status=1; cat "$outdir"/.peer_?.err >&2; }
    rm -f "$outdir"/.peer_?.out "$outdir"/.peer_?.err
  fi
  rm -rf "$scratch"
  return $status
}

options=("$@")
status=0
for round in $(seq 1 "$rounds"); do
  # Rotate: round r starts with side r, so no side always runs first or last.
  for ((k = 0; k < ${#sides[@]}; ++k)); do
    side=${sides[$(((k + round - 1) % ${#sides[@]}))]}
    echo "round $round: $side"
    # shellcheck disable=SC2086  # "impl mode"
    run $side || status=1
  done
done

python3 - "$runs" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
sides = {}
for r in runs:
    sides.setdefault((r["impl"], r["mode"]), []).append(r)
def med(rows, key):
    return statistics.median(row[key] for row in rows)
dcp_async = sides.get(("dcp", "async"))
print()
print("| side | state per rank (MB) | blocked per save (s) | ÷ plain copy | ÷ DCP async_save | step (s) | step while writing (s) | ÷ step | wait after the steps (s) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (impl, mode), rows in sorted(sides.items()):
    blocked, copy, step = med(rows, "blocked_s"), med(rows, "copy_s"), med(rows, "step_s")
    writing = med(rows, "step_writing_s")
    vs_dcp = f"{blocked / med(dcp_async, 'blocked_s'):.2f}" if dcp_async else "–"
    during = f"{writing:.3f}" if writing > 0 else "–"
    ratio = f"{writing / step:.2f}" if writing > 0 else "–"
    name = {"ours": "ours", "dcp": "PyTorch DCP"}[impl] + (" async" if mode.startswith("async") else " sync")
    name += ", two tiers" if mode.endswith("_tiers") else ""
    print(f"| {name} | {med(rows, 'state_mb_per_rank'):.0f} | {blocked:.3f} | {blocked / copy:.2f} | {vs_dcp} | "
          f"{step:.3f} | {during} | {ratio} | {med(rows, 'wait_s'):.3f} |")
PY
exit $status
