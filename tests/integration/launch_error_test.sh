#!/usr/bin/env bash
# A launcher environment that MPI cannot see (the symptom of `srun --mpi=` with
# the wrong plugin, or a program built against another MPI) must end the
# program with a LaunchError that says what to do — never run as N separate
# worlds of one.
# usage: launch_error_test.sh <tool>
set -euo pipefail
tool=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

check() {
  local label=$1
  shift
  local out rc=0
  out=$(env "$@" timeout 60 "$tool" env 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -ne 0 ] || fail "$label: exit code 0"
  grep -q "started 2 processes but MPI reports a world of 1" <<<"$out" || fail "$label: no size mismatch message"
  grep -q -- "--mpi=pmix" <<<"$out" || fail "$label: no remedy"
}

# What an srun task looks like to a program whose MPI ignores srun's PMI.
check srun SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_STEP_NUM_TASKS=2
# What an MPICH Hydra rank looks like to an MPI that is not MPICH.
check hydra PMI_RANK=0 PMI_SIZE=2 MPI_LOCALRANKID=0 MPI_LOCALNRANKS=2
echo "PASS"
