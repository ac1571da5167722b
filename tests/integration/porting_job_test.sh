#!/usr/bin/env bash
# The porting guide's job (jobs/porting, docs/porting.md) under mpirun: it
# learns, keeps the newest two checkpoints, logs one tracker row per epoch,
# saves the model as safetensors, and a second run resumes after the last
# saved epoch, also on another number of ranks.
# usage: porting_job_test.sh <porting> <mpiexec> [mpiexec flags...]
set -euo pipefail
porting=$1 mpiexec=$2
shift 2
launch=("$mpiexec" "$@")
work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-porting-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

run() {  # <label> <np> <porting args...>
  local label=$1 np=$2
  shift 2
  echo "--- $label: $np rank(s): $*"
  timeout 300 "${launch[@]}" -n "$np" "$porting" "$@" >"$work/$label.log" 2>&1 || {
    cat "$work/$label.log"
    fail "$label exited with an error"
  }
  grep "porting:" "$work/$label.log" || true
}
eval_loss() { sed -n "s/^porting: epoch $2 eval loss \([0-9.]*\)$/\1/p" "$work/$1.log"; }

run first 2 --project-dir "$work/run" --epochs 3
[ "$(grep -c '^porting: epoch' "$work/first.log")" = 3 ] || fail "expected 3 epochs printed once each (one node)"
awk -v a="$(eval_loss first 0)" -v b="$(eval_loss first 2)" 'BEGIN { exit !(b < a) }' ||
  fail "the eval loss did not fall: $(eval_loss first 0) -> $(eval_loss first 2)"
[ "$(ls "$work/run/checkpoints")" = "$(printf 'checkpoint_1\ncheckpoint_2')" ] ||
  fail "expected checkpoint_1 and checkpoint_2 (total_limit 2), found: $(ls "$work/run/checkpoints")"
[ "$(wc -l <"$work/run/porting/metrics.jsonl")" = 3 ] || fail "metrics.jsonl does not hold one line per epoch"
grep -q '"eval_loss"' "$work/run/porting/metrics.jsonl" || fail "metrics.jsonl has no eval_loss"
[ -s "$work/run/model/model.safetensors" ] || fail "no model/model.safetensors"

# Resume on 4 ranks: epochs 3 and 4 only, numbering continues.
run resumed 4 --project-dir "$work/run" --epochs 5
grep -q "^porting: resumed at epoch 3$" "$work/resumed.log" || fail "the second run did not resume at epoch 3"
[ "$(grep -c '^porting: epoch' "$work/resumed.log")" = 2 ] || fail "the resumed run did not train epochs 3 and 4 only"
grep -q "^porting: epoch 3 " "$work/resumed.log" || fail "no epoch 3 after resuming"
[ "$(ls "$work/run/checkpoints")" = "$(printf 'checkpoint_3\ncheckpoint_4')" ] ||
  fail "expected checkpoint_3 and checkpoint_4 after resuming, found: $(ls "$work/run/checkpoints")"

# One process, from scratch.
run single 1 --project-dir "$work/single" --epochs 1
[ -d "$work/single/checkpoints/checkpoint_0" ] || fail "one process wrote no checkpoint_0"
echo "porting job: learns, checkpoints, resumes on another number of ranks"
