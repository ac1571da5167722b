#!/usr/bin/env bash
# Launcher detection under a real Slurm started on localhost:
#   srun -n 2 / -n 4 (direct launch), a batch step run without srun, and
#   mpirun inside an sbatch allocation (ranks inherit SLURM_PROCID=0).
# usage: slurm_launch_test.sh <hello_state> <srun --mpi plugin> <mpiexec> [mpiexec flags...]
set -euo pipefail
program=$1 plugin=$2 mpiexec=$3
shift 3
mpiexec_flags=("$@")
here=$(cd "$(dirname "$0")" && pwd)
state_dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-slurm.XXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }

# shellcheck source=slurm/slurm_session.sh
. "$here/slurm/slurm_session.sh"
start_slurm "$state_dir"

expect_ranks() {  # <label> <output> <n> <launcher>
  local label=$1 out=$2 n=$3 launcher=$4
  echo "--- $label"; echo "$out"
  for ((r = 0; r < n; r++)); do
    grep -q "rank $r/$n local $r/$n node 0/1 .* launcher $launcher" <<<"$out" || fail "$label: rank $r wrong"
  done
  grep -q "hello_state: $n process(es)" <<<"$out" || fail "$label: no summary for $n processes"
}

out=$(timeout 120 srun -n 2 --mpi="$plugin" "$program" 2>&1) || fail "srun -n 2: $out"
expect_ranks "srun -n 2" "$out" 2 slurm-srun
out=$(timeout 120 srun -n 4 --mpi="$plugin" "$program" 2>&1) || fail "srun -n 4: $out"
expect_ranks "srun -n 4" "$out" 4 slurm-srun

# sbatch: the batch script runs the program once directly, then under mpirun.
script="$state_dir/job.sh"
{
  echo '#!/usr/bin/env bash'
  echo "\"$program\""
  printf '%q ' "$mpiexec" -n 2 "${mpiexec_flags[@]}" "$program"; echo
} >"$script"
chmod +x "$script"
job=$(sbatch --parsable -n 2 -o "$state_dir/job.out" "$script")
for _ in $(seq 1 120); do
  grep -q . <<<"$(squeue -h -j "$job" 2>/dev/null || true)" || break
  sleep 0.5
done
out=$(cat "$state_dir/job.out")
echo "--- sbatch job $job"; echo "$out"
grep -q "rank 0/1 local 0/1 node 0/1 .* launcher none" <<<"$out" || fail "batch step: not a world of one"
grep -q "hello_state: 1 process(es)" <<<"$out" || fail "batch step: no summary"
for r in 0 1; do
  grep -q "rank $r/2 local $r/2 .* launcher openmpi-mpirun\|rank $r/2 local $r/2 .* launcher mpich-hydra" <<<"$out" \
    || fail "mpirun inside sbatch: rank $r wrong"
done

# The job script users submit (jobs/hello_state/hello_state.sbatch), unchanged.
job_script="$here/../../jobs/hello_state/hello_state.sbatch"
job=$(sbatch --parsable -n 2 -o "$state_dir/script.out" \
  --export=ALL,HELLO_STATE="$program",SRUN_MPI="$plugin" "$job_script")
for _ in $(seq 1 120); do
  grep -q . <<<"$(squeue -h -j "$job" 2>/dev/null || true)" || break
  sleep 0.5
done
out=$(cat "$state_dir/script.out")
expect_ranks "hello_state.sbatch job $job" "$out" 2 slurm-srun
echo "PASS"
