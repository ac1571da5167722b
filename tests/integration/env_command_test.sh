#!/usr/bin/env bash
# `accelerate-hpc env` under the MPI launcher: every rank reports exactly once,
# with distinct ranks and local ranks, and the version table is complete.
# usage: env_command_test.sh <nprocs> <tool> <mpiexec> [mpiexec flags...]
set -euo pipefail
nprocs=$1 tool=$2 mpiexec=$3
shift 3

out=$(timeout 120 "$mpiexec" -n "$nprocs" "$@" "$tool" env)
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

for component in Accelerate-HPC LibTorch MPI HDF5 CUDA NCCL Kokkos hwloc TensorBoard Launcher; do
  grep -q "^- $component:" <<<"$out" || fail "no '$component' line"
done
grep -q "Layout: *$nprocs process(es)" <<<"$out" || fail "layout does not say $nprocs processes"

ranks=$(grep -c '^  rank ' <<<"$out" || true)
[ "$ranks" -eq "$nprocs" ] || fail "expected $nprocs rank lines, got $ranks"
for ((r = 0; r < nprocs; r++)); do
  grep -q "^  rank $r/$nprocs local $r/$nprocs node 0/1 " <<<"$out" || fail "rank $r line missing or wrong"
done
if [ "$nprocs" -gt 1 ]; then
  grep -q "launcher openmpi-mpirun\|launcher mpich-hydra" <<<"$out" || fail "launcher not recognised"
  grep -q "type MULTI_" <<<"$out" || fail "distributed type is not MULTI_*"
fi
echo "PASS"
