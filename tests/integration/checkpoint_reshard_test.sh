#!/usr/bin/env bash
# A checkpoint saved by one mpirun on N ranks loads in another on M ranks:
# 4 -> 2, 2 -> 4, 2 -> 1 (model and optimizer state global, RNG rows mapped
# by rank % saved world size).
# Usage: checkpoint_reshard_test.sh <checkpoint_job> <mpiexec> [mpiexec flags...]
set -euo pipefail
job=$1; mpiexec=$2; shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_reshard.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for pair in "4 2" "2 4" "2 1" "1 4"; do
  read -r saved loaded <<<"$pair"
  rm -rf "${dir:?}"/*
  timeout 120 "$mpiexec" -n "$saved" "$@" "$job" save "$dir" 3
  out=$(timeout 120 "$mpiexec" -n "$loaded" "$@" "$job" load "$dir" 3)
  echo "$out"
  grep -q "loaded checkpoint_3 (saved on $saved ranks) on $loaded ranks" <<<"$out" || {
    echo "FAIL: $saved -> $loaded"; exit 1; }
done
echo "resharding OK"
