#!/usr/bin/env bash
# SIGKILL of one rank inside each collective family (fault_job.cpp), at one
# size, under one launcher. For every family the job must end within the
# 3 s timeout plus a few seconds after the kill, with a message naming the
# dead rank, and a checkpoint committed before the kill must still load and
# hold its values.
#
#   mpirun            the launcher ends the job when a rank dies; the job must
#                     exit non-zero and the launcher names the rank (Open MPI).
#                     MPICH's mpiexec kills the survivors at once and reports
#                     the first process it saw end, often a survivor it killed,
#                     so there only its report is required (docs/testing.md)
#   mpirun-survivors  Open MPI's --enable-recovery leaves the survivors running:
#                     they must end themselves, through our collective timeout
#                     (naming the rank) or, inside HDF5's own collectives, the
#                     blocking-call watchdog (exit code 3). MPICH's mpiexec
#                     ends the job either way: the mode is skipped there.
#   srun              srun against a Slurm started on localhost
# usage: fault_injection_test.sh <nprocs> <fault_job> mpirun|mpirun-survivors <mpiexec> [mpiexec flags...]
#        fault_injection_test.sh <nprocs> <fault_job> srun <--mpi plugin>
set -euo pipefail
nprocs=$1 program=$2 launcher=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-fault.XXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }

# Seconds a survivor may take after the kill: the collective timeout (3 s),
# then reporting and the launcher tearing the job down on 2 busy cores.
allowed_after_kill=15

hydra=  # set when the launcher is MPICH's mpiexec (Hydra)
case "$launcher" in
  mpirun | mpirun-survivors)
    mpiexec=$1
    shift
    keep=()
    # Read whole before grep: under pipefail, `--version | grep -q` fails at
    # random when grep stops reading before mpiexec ends its output.
    version=$("$mpiexec" --version 2>&1 || true)
    if [ "$launcher" = mpirun-survivors ]; then
      if ! grep -q "Open MPI\|OpenRTE" <<<"$version"; then
        echo "ACCELERATE_TEST_SKIPPED: only Open MPI's mpirun can leave the survivors of a dead rank running"
        rm -rf "$work"
        exit 77
      fi
      keep=(--enable-recovery)
    fi
    launch=(timeout 120 "$mpiexec" -n "$nprocs" "${keep[@]}" "$@")
    if grep -q "HYDRA" <<<"$version"; then hydra=1; fi
    trap 'rm -rf "$work"' EXIT
    ;;
  srun)
    # shellcheck source=slurm/slurm_session.sh
    . "$here/slurm/slurm_session.sh"
    start_slurm "$work/slurm"   # its EXIT trap removes the Slurm state
    trap '"$here/slurm/slurm_down.sh" "$work/slurm" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
    # The step's own defaults: no --kill-on-bad-exit, so the survivors of a
    # SIGKILL are left running and only our deadline can end them.
    launch=(timeout 120 srun -n "$nprocs" --mpi="$1")
    ;;
  *) fail "unknown launcher $launcher" ;;
esac

victim=$((nprocs - 1))
# What names the dead rank: Open MPI's mpirun, srun (task N is rank N), or our
# TimeoutError (the victim never arrived at the next collective).
names_victim="process rank $victim with PID [0-9]* .*exited on signal 9|srun: error: .*: task $victim: Killed"
names_victim+="|never arrived: $victim\b"
watchdog_report="did not return within 3000 ms[^.]*\. It is a blocking collective call"

for operation in all_reduce broadcast_object dispatcher_scatter checkpoint_write checkpoint_load; do
  dir=$work/$operation
  mkdir -p "$dir"
  rc=0
  out=$("${launch[@]}" "$program" "$operation" "$victim" "$dir" 2>&1) || rc=$?
  ended=$(date +%s%3N)
  echo "--- $operation on $nprocs ranks under $launcher: exit code $rc"
  echo "$out"
  if grep -q "usage: fault_job" <<<"$out"; then echo "skip: $operation is not in this build"; continue; fi
  [ "$rc" -ne 124 ] || fail "$operation: the survivors hung until the test's own timeout"
  # Under --enable-recovery mpirun exits 0 whatever its ranks did.
  [ "$rc" -ne 0 ] || [ "$launcher" = mpirun-survivors ] || fail "$operation: the job exited 0 although rank $victim was killed"
  [ -s "$dir/killed_at" ] || fail "$operation: rank $victim was never killed (the job ended before the kill)"
  after=$(( (ended - $(cat "$dir/killed_at")) / 1000 ))
  echo "$operation: the job ended ${after} s after the kill"
  [ "$after" -le "$allowed_after_kill" ] || fail "$operation: the survivors took ${after} s after the kill"
  named="$names_victim"
  [ "$launcher" != mpirun ] || [ -z "$hydra" ] || named+="|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
  if [ "$launcher" = mpirun-survivors ]; then
    # A survivor itself must have ended the job: with our TimeoutError naming
    # the rank, or with the watchdog's report when the kill caught every rank
    # inside one of HDF5's collectives (where no rank can be named).
    grep -qE "never arrived: $victim\b" <<<"$out" || grep -qE "$watchdog_report" <<<"$out" ||
      fail "$operation: no survivor reported the dead rank $victim"
  else
    grep -qE "$named" <<<"$out" || fail "$operation: no message names the dead rank $victim"
  fi
  if grep -q "the loop ended without the kill" <<<"$out"; then fail "$operation: a survivor finished its loop"; fi
  case "$operation" in
    checkpoint_*)
      out=$("${launch[@]}" "$program" verify "$dir" 2>&1) || fail "$operation: the last committed checkpoint does not load: $out"
      grep -q "verified checkpoint_" <<<"$out" || fail "$operation: verify printed no result: $out"
      echo "$operation: $(grep -o 'verified checkpoint_[0-9]*' <<<"$out") intact"
      ;;
  esac
done
echo "PASS"
