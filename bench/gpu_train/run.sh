#!/usr/bin/env bash
# Single-GPU training throughput: bench_gpu_train (our C++ loop through the
# Accelerator) against the same loop in Python through Hugging Face
# Accelerate (accelerate_peer.py, PyTorch's default foreach AdamW, and with
# --foreach-too also AdamW's per-parameter path, which is what LibTorch's C++
# AdamW does). Each precision runs in its own processes (Accelerate keeps one
# mixed-precision state per process); the sides' order alternates by round.
#
# usage: bench/gpu_train/run.sh --bench PATH [--python python3] [--rounds 2]
#          [--workloads W1,W2,T] [--precisions fp32,bf16] [--batches 32,...]
#          [--steps 50] [--warmup 10] [--foreach-too] [--out DIR]
# Writes DIR/gpu_train.jsonl (every run) and prints the table (report.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench='' python=python3 rounds=2 out=. foreach_too=0
common=()
precisions=fp32,bf16
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=$2; shift ;;
    --python) python=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --out) out=$2; shift ;;
    --precisions) precisions=$2; shift ;;
    --workloads|--batches|--steps|--warmup) common+=("$1" "$2"); shift ;;
    --foreach-too) foreach_too=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$bench" ] || { echo "run.sh: --bench must name the bench_gpu_train executable" >&2; exit 2; }
mkdir -p "$out"
results=$out/gpu_train.jsonl
: >"$results"
ours() { "$bench" --precisions "$1" ${common[@]+"${common[@]}"} >>"$results"; }
peer() { PYTHONUNBUFFERED=1 "$python" "$here/accelerate_peer.py" --precisions "$1" ${common[@]+"${common[@]}"} "${@:2}" >>"$results"; }
for ((round = 0; round < rounds; ++round)); do
  for precision in ${precisions//,/ }; do
    echo "round $round, $precision" >&2
    if ((round % 2 == 0)); then ours "$precision"; peer "$precision"; else peer "$precision"; ours "$precision"; fi
    if [ "$foreach_too" = 1 ] && ((round == 0)); then peer "$precision" --foreach 0; fi
  done
done
"$python" "$here/report.py" "$results"
