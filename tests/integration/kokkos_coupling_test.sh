#!/usr/bin/env bash
# jobs/kokkos-coupling under mpirun: the surrogate learns; a run stopped after
# its checkpoint and resumed ends bit-identical to the uninterrupted run; the
# checkpoint holds the simulation (one row per rank, layout recorded) next to
# the model.
# usage: kokkos_coupling_test.sh <np> <kokkos_coupling> <mpiexec> [mpiexec flags...]
set -euo pipefail
np=$1 job=$2 mpiexec=$3
shift 3
launch=("$mpiexec" "$@" -n "$np" "$job")
work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-kokkos-coupling.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

timeout 300 "${launch[@]}" --project-dir "$work/full" --steps 80 >"$work/full.log" 2>&1 || { cat "$work/full.log"; fail "full run"; }
cat "$work/full.log"
grep -q "kokkos-coupling: done" "$work/full.log" || fail "no 'done' line"
first=$(sed -n 's/.*sim step 20 surrogate loss \([0-9.e-]*\).*/\1/p' "$work/full.log")
last=$(sed -n 's/.*final sim step 80 .* surrogate loss \([0-9.e-]*\) .*/\1/p' "$work/full.log")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' || fail "the surrogate did not learn ($first -> $last)"

timeout 300 "${launch[@]}" --project-dir "$work/split" --steps 80 --checkpoint-every 30 --stop-after 50 \
  >"$work/stopped.log" 2>&1 || { cat "$work/stopped.log"; fail "stopped run"; }
grep -q "stopped at sim step 50" "$work/stopped.log" || fail "did not stop at step 50"
timeout 300 "${launch[@]}" --project-dir "$work/split" --steps 80 --checkpoint-every 30 --resume \
  >"$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "resumed run"; }
cat "$work/resumed.log"
grep -q "resumed from .*checkpoint_0 at sim step 30" "$work/resumed.log" || fail "did not resume at sim step 30"
[ "$(grep 'final sim step' "$work/resumed.log")" = "$(grep 'final sim step' "$work/full.log")" ] ||
  fail "the resumed run does not end like the uninterrupted one"

file=$work/split/checkpoints/checkpoint_1/state.h5
listing=$(h5ls -r "$file")
grep -q "^/custom_checkpoint_0/temperature *Dataset {$np, 66}" <<<"$listing" || fail "no per-rank temperature rows: $listing"
grep -q "^/pytorch_model/fc1.weight" <<<"$listing" || fail "no model in the same file"
grep -q '"Kokkos::LayoutRight"' <<<"$(h5dump -a /custom_checkpoint_0/layout "$file")" || fail "layout not recorded"
echo "kokkos coupling on $np rank(s): OK"
