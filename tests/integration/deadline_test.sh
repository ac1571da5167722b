#!/usr/bin/env bash
# One rank never reaches one collective step of a module: the others
# must fail within the 2 s timeout with a TimeoutError that names the step
# and the missing rank, then abort the job; nothing may hang.
# usage: deadline_test.sh <operation> <missing rank: first|last> <expected step text> <nprocs> <program>
#                         <mpiexec> [mpiexec flags...]
# (a broadcast's root does not wait for the others: its steps leave out the root)
set -euo pipefail
operation=$1 which=$2 step=$3 nprocs=$4 program=$5 mpiexec=$6
shift 6
fail() { echo "FAIL: $*" >&2; exit 1; }

start=$(date +%s)
rc=0
missing=$((nprocs - 1))
[ "$which" = last ] || missing=0
out=$(timeout 60 "$mpiexec" -n "$nprocs" "$@" "$program" "$operation" "$missing" 2>&1) || rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed}s"
[ "$rc" -ne 124 ] || fail "the job hung until the test's own timeout"
grep -q "usage: deadline_job" <<<"$out" && { echo "SKIP: $operation is not in this build"; exit 77; }
[ "$rc" -ne 0 ] || fail "the job succeeded although a rank skipped the step"
[ "$elapsed" -lt 30 ] || fail "the timeout took ${elapsed}s"
# Not anchored: another rank's stderr may land at the start of the same line.
waiting=$(grep -c "TimeoutError:" <<<"$out" || true)
# Every waiting rank should report; the abort may cut some off, so at least one.
[ "$waiting" -ge 1 ] || fail "no TimeoutError reported"
reports=$(grep "TimeoutError:" <<<"$out")
grep -qF "$step" <<<"$reports" || fail "operation '$step' not named"
grep -q "never arrived: $missing (no answer" <<<"$reports" || fail "missing rank $missing not named"
if grep -q "completed without rank" <<<"$out"; then fail "a rank completed the step without rank $missing"; fi
echo "PASS"
