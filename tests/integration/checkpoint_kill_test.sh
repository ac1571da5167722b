#!/usr/bin/env bash
# SIGKILL one rank in the middle of a save (between writing the data and the
# commit, held there by the ACCELERATE_TEST_CHECKPOINT_PAUSE hook). The
# previous checkpoint must stay intact and load, the half-written one must be
# ignored, and total_limit=1 rotation must not have removed the last good one.
# Usage: checkpoint_kill_test.sh <nprocs> <checkpoint_job> <mpiexec> [mpiexec flags...]
set -euo pipefail
n=$1; job=$2; mpiexec=$3; shift 3
dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_kill.XXXXXX")
log=$dir.log
launcher=
trap '[ -n "$launcher" ] && kill "$launcher" 2>/dev/null; rm -rf "$dir" "$log"' EXIT

timeout 120 "$mpiexec" -n "$n" "$@" "$job" save "$dir" 0 1 2>/dev/null

ACCELERATE_TEST_CHECKPOINT_PAUSE=90 timeout 150 "$mpiexec" -n "$n" "$@" "$job" save "$dir" 1 1 >"$log" 2>&1 &
launcher=$!
# Kill as soon as the data is being written and committed: the ranks' stderr
# lines may interleave, so counting one "pausing" line per rank is not reliable.
for _ in $(seq 900); do
  grep -q 'pausing' "$log" && grep -q "checkpoint_job pid [0-9]* rank $((n - 1))\$" "$log" && break
  sleep 0.1
done
grep -q pausing "$log" || { echo "FAIL: the save never reached the pause"; cat "$log"; exit 1; }
victim=$(grep -o "checkpoint_job pid [0-9]* rank $((n - 1))\$" "$log" | head -n1 | cut -d' ' -f3)
[ -n "$victim" ] || { echo "FAIL: no pid for rank $((n - 1))"; cat "$log"; exit 1; }
# The half-written checkpoint exists on disk at this point, under a staging name.
grep -q '^\.checkpoint_1\.tmp-' <<<"$(ls -a "$dir")" || { echo "FAIL: no staging directory"; ls -a "$dir"; exit 1; }
kill -9 "$victim"
status=0
wait "$launcher" || status=$?
launcher=
[ "$status" -ne 0 ] || { echo "FAIL: the job survived the kill"; exit 1; }

[ ! -e "$dir/checkpoint_1" ] || { echo "FAIL: checkpoint_1 appeared"; exit 1; }
[ -f "$dir/checkpoint_0/manifest.json" ] || { echo "FAIL: checkpoint_0 was damaged"; exit 1; }
out=$(timeout 120 "$mpiexec" -n "$n" "$@" "$job" load "$dir" 0 2>/dev/null)
grep -q "loaded checkpoint_0" <<<"$out" || { echo "FAIL: previous checkpoint does not load"; exit 1; }

# The next save succeeds next to the leftover staging directory, and only
# then does rotation remove checkpoint_0.
timeout 120 "$mpiexec" -n "$n" "$@" "$job" save "$dir" 1 1 2>/dev/null
out=$(timeout 120 "$mpiexec" -n "$n" "$@" "$job" load "$dir" 1 2>/dev/null)
grep -q "loaded checkpoint_1" <<<"$out" || { echo "FAIL: new checkpoint does not load"; exit 1; }
[ ! -e "$dir/checkpoint_0" ] || { echo "FAIL: rotation did not run after the commit"; exit 1; }
echo "kill test OK"
