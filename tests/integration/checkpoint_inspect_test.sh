#!/usr/bin/env bash
# `inspect` summarises a real checkpoint and verifies every checksum; after
# bytes of one dataset are flipped in the file it names that dataset and fails.
# Usage: checkpoint_inspect_test.sh <checkpoint_job> <accelerate-hpc> <mpiexec> [mpiexec flags...]
set -euo pipefail
job=$1; cli=$2; mpiexec=$3; shift 3
command -v h5dump >/dev/null || { echo "ACCELERATE_TEST_SKIPPED: h5dump not installed"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_inspect.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

timeout 120 "$mpiexec" -n 2 "$@" "$job" save "$dir" 4 2>/dev/null
out=$(timeout 120 "$mpiexec" -n 2 "$@" "$cli" inspect "$dir/checkpoint_4")
echo "$out"
grep -q "complete (manifest valid)" <<<"$out" || fail "not reported complete"
grep -q "step 400, iteration 4, world size 2" <<<"$out" || fail "wrong summary"
grep -q ", 0 corrupted" <<<"$out" || fail "intact checkpoint reported corrupted"

# Flip bytes in the middle of /pytorch_model/fc1.weight (its file offset from h5dump -p).
file=$dir/checkpoint_4/state.h5
address=$(h5dump -p -H -d /pytorch_model/fc1.weight "$file" | grep -o 'OFFSET [0-9]*' | head -n1 | cut -d' ' -f2)
[ -n "$address" ] || fail "no dataset offset from h5dump -p"
printf '\x01\x02\x03\x04' | dd of="$file" bs=1 seek=$((address + 100000)) conv=notrunc status=none
status=0
out=$(timeout 120 "$mpiexec" -n 2 "$@" "$cli" inspect "$dir/checkpoint_4") || status=$?
echo "$out"
[ "$status" -ne 0 ] || fail "inspect succeeded on a corrupted checkpoint"
grep -q "pytorch_model/fc1.weight .*CHECKSUM MISMATCH" <<<"$out" || fail "corrupted dataset not named"
grep -q ", 1 corrupted" <<<"$out" || fail "more than the damaged dataset reported"
echo "inspect OK"
