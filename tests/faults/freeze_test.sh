#!/usr/bin/env bash
# One rank freezes itself (SIGSTOP) at one moment of a job (freeze_job.cpp);
# every other rank must leave within the job's timeout plus a margin, and
# say why. Open MPI's mpirun with --enable-recovery, so the launcher never
# ends the job for us: only the library's own deadlines can.
#
# usage: freeze_test.sh <moment> <nprocs> <freeze_job> <mpiexec> [mpiexec flags...]
set -euo pipefail
moment=$1 nprocs=$2 program=$3 mpiexec=$4
shift 4
timeout_s=4
margin_s=10  # the arrival query (up to 2 s), the short report after a timeout (0.5 s), MPI_Abort's grace (1 s), teardown
work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-freeze.XXXXXX")
job=
cleanup() {
  # The frozen rank never ends by itself: SIGKILL works on a stopped process.
  if [ -n "$job" ]; then pkill -KILL -s "$job" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL ($moment, $nprocs ranks): $*" >&2; exit 1; }

version=$("$mpiexec" --version 2>&1 || true)
if ! grep -q "Open MPI\|OpenRTE" <<<"$version"; then
  echo "ACCELERATE_TEST_SKIPPED: only Open MPI's mpirun (--enable-recovery) leaves the survivors of a stopped rank running"
  exit 77
fi

victim=$((nprocs - 1))
ACCELERATE_TIMEOUT=$timeout_s setsid "$mpiexec" -n "$nprocs" --enable-recovery "$@" \
  "$program" "$moment" "$victim" "$work" >"$work/out.txt" 2>&1 </dev/null &
job=$!

# The survivors: every rank but the victim, once it has frozen.
deadline=$((SECONDS + 60))
while [ ! -s "$work/frozen_at" ]; do
  [ $SECONDS -lt $deadline ] || { cat "$work/out.txt"; fail "the victim never froze"; }
  sleep 0.05
done
frozen_at=$(cat "$work/frozen_at")
# The ranks are the launcher's children; the victim is the stopped one (T).
survivors() { pgrep -P "$job" | while read -r pid; do
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
  [ "$state" = T ] || [ -z "$state" ] || [ "$state" = Z ] || echo "$pid"; done; }
limit=$(( frozen_at + (timeout_s + margin_s) * 1000 ))
while [ -n "$(survivors)" ]; do
  if [ "$(date +%s%3N)" -gt "$limit" ]; then
    for pid in $(survivors); do
      echo "--- survivor $pid:"; timeout 60 gdb -batch -p "$pid" -ex "thread apply all bt 15" 2>/dev/null | grep -E "^#|^Thread" || true
    done
    cat "$work/out.txt"
    fail "a survivor is still alive $((timeout_s + margin_s)) s after rank $victim froze"
  fi
  sleep 0.05
done
ended=$(date +%s%3N)
cat "$work/out.txt"
echo "the survivors left $(( (ended - frozen_at) / 1000 )) s after rank $victim froze (limit $((timeout_s + margin_s)) s)"
# Each survivor said why it left: a timeout naming the frozen rank, or the
# watchdog's report of the blocked call.
grep -qE "never arrived: $victim\b|did not return within $((timeout_s * 1000)) ms" "$work/out.txt" ||
  fail "no survivor reported the frozen rank or the blocked call"
if grep -q "reached the end" "$work/out.txt" && [ "$moment" != exit ]; then fail "a survivor finished the job"; fi
echo PASS
