#!/usr/bin/env bash
# TensorBoard's own reader opens what the TensorBoard tracker wrote: at 1, 2
# and 4 ranks, tensorboard_job logs known values and tensorboard_read.py
# checks every one (CRCs, scalars, text, histogram, hyper-parameters, one
# event file per run). Skips (77) where TensorBoard cannot be installed.
# usage: tensorboard_reader_test.sh <tensorboard_job> <mpiexec> [mpiexec flags...]
set -euo pipefail
job=$1 mpiexec=$2
shift 2
launch=("$mpiexec" "$@")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/accelerate-tensorboard-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! python=$("$here/../tensorboard_venv.sh" 2>"$work/venv.log"); then
  cat "$work/venv.log" >&2
  echo "ACCELERATE_TEST_SKIPPED: TensorBoard's Python reader could not be installed (see above)"
  exit 77
fi

for np in 1 2 4; do
  timeout 120 "${launch[@]}" -n "$np" "$job" "$work/np$np" >"$work/np$np.log" 2>&1 || {
    cat "$work/np$np.log"
    fail "tensorboard_job at $np rank(s) failed"
  }
  "$python" "$here/tensorboard_read.py" "$work/np$np/tb" || fail "the run of $np rank(s) did not read back"
  grep -q "ranks $np" <("$python" -c '
import sys
from tensorboard.backend.event_processing import event_accumulator as ea
a = ea.EventAccumulator(sys.argv[1]); a.Reload()
print(a.Tensors("note")[0].tensor_proto.string_val[0].decode())' "$work/np$np/tb") ||
    fail "the text logged at $np rank(s) does not name $np ranks"
done
echo "tensorboard_reader_test: passed at 1, 2 and 4 ranks"
