#!/usr/bin/env bash
# A rank that never reaches a collective ends the job: the waiting ranks
# report the operation, the group and the missing rank, then MPI_Abort.
# usage: collective_timeout_test.sh <nprocs> <program> <mpiexec> [mpiexec flags...]
set -euo pipefail
nprocs=$1 program=$2 mpiexec=$3
shift 3
fail() { echo "FAIL: $*" >&2; exit 1; }

start=$(date +%s)
rc=0
out=$(timeout 120 "$mpiexec" -n "$nprocs" "$@" "$program" 2>&1) || rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || fail "the job succeeded although a rank skipped the collective"
[ "$rc" -ne 124 ] || fail "the job hung until the test's own timeout"
[ "$elapsed" -lt 60 ] || fail "the abort took ${elapsed}s"
last=$((nprocs - 1))
grep -q "collective timeout: all_reduce(sum) Float\[16\] on group 'world'" <<<"$out" || fail "operation not named"
grep -q "Ranks that never arrived: $last (no answer: not inside any collective of this group)" <<<"$out" || fail "missing rank not named"
grep -q "Aborting the job" <<<"$out" || fail "no abort announced"
echo "PASS"
