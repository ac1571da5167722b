#!/usr/bin/env bash
# Stock HDF5 tools read a real checkpoint: h5ls -r shows the documented
# layout, h5dump -A the documented attributes, h5diff compares datasets of
# two checkpoints. Also checks which HDF5 library our H5 calls bind to.
# Usage: checkpoint_h5tools_test.sh <checkpoint_job> <mpiexec> [mpiexec flags...]
set -euo pipefail
# The program is also started without a launcher (MPI singleton), which Open MPI refuses as root unless allowed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$1; mpiexec=$2; shift 2
for tool in h5ls h5dump h5diff; do
  command -v $tool >/dev/null || { echo "ACCELERATE_TEST_SKIPPED: $tool not installed (hdf5-tools)"; exit 77; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_h5tools.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

timeout 120 "$mpiexec" -n 2 "$@" "$job" save "$dir/a" 5 2>/dev/null
timeout 120 "$mpiexec" -n 2 "$@" "$job" save "$dir/b" 5 2>/dev/null
timeout 120 "$mpiexec" -n 2 "$@" "$job" save "$dir/c" 6 2>/dev/null
file=$dir/a/checkpoint_5/state.h5

listing=$(h5ls -r "$file")
echo "$listing"
# h5ls pads the name column: match "<name> <spaces> <description>".
for line in '/pytorch_model|Group' '/pytorch_model/fc1.weight|Dataset {512, 1024}' \
            '/pytorch_model/fc2.weight|Dataset {10, 512}' '/pytorch_model/mask|Dataset {7, 3}' \
            '/optimizer/state/fc1.weight/exp_avg|Dataset {512, 1024}' \
            '/random_states/torch|Dataset {2, 8}' '/scheduler|Group'; do
  name=${line%%|*}; what=${line#*|}
  grep -q "^$name  *$what\$" <<<"$listing" || fail "h5ls -r lacks '$name $what'"
done

attributes=$(h5dump -A "$file")
for text in 'ATTRIBUTE "format"' '"accelerate-hpc-checkpoint"' 'ATTRIBUTE "format_version"' \
            'ATTRIBUTE "world_size"' 'ATTRIBUTE "num_nodes"' 'ATTRIBUTE "step"' 'ATTRIBUTE "iteration"' \
            'ATTRIBUTE "mixed_precision"' 'ATTRIBUTE "created"' 'ATTRIBUTE "torch_version"' \
            'ATTRIBUTE "library_version"' 'ATTRIBUTE "crc32c"' 'H5T_STD_U32LE' '"bfloat16"' '"float16"' \
            'ATTRIBUTE "row_crc32c"' '"per_rank"' '"replicated"' 'last_epoch'; do
  grep -qF "$text" <<<"$attributes" || fail "h5dump -A lacks '$text'"
done
# Data of a bf16 dataset is shown as numbers by h5dump (a 16-bit float type).
grep -q 'H5T_IEEE_F32LE\|32-bit\|16-bit\|H5T_FLOAT\|FLOAT' <<<"$(h5dump -d /pytorch_model/fc2.weight -H "$file")" ||
  fail "h5dump cannot describe the bfloat16 type"
h5dump -d /pytorch_model/fc1.bias -c 4 "$file" >/dev/null || fail "h5dump cannot read a dataset"

# Same content -> no differences; another iteration -> differences.
second=$dir/b/checkpoint_5/state.h5
other=$dir/c/checkpoint_5/state.h5
[ -e "$other" ] || other=$dir/c/checkpoint_6/state.h5
h5diff "$file" "$second" /pytorch_model /pytorch_model || fail "h5diff found differences between equal saves"
h5diff "$file" "$second" /optimizer /optimizer || fail "h5diff found differences between equal saves"
if h5diff -q "$file" "$other" /pytorch_model/fc1.weight /pytorch_model/fc1.weight; then
  fail "h5diff found no difference between iterations 5 and 6"
fi

# Our HDF5 calls bind to the MPI build of HDF5, not LibTorch's serial one.
LD_DEBUG=bindings LD_DEBUG_OUTPUT=$dir/bindings timeout 120 "$job" save "$dir/d" 1 >/dev/null 2>&1
bindings=$(cat "$dir"/bindings.* | grep 'libaccelerate-hpc' | grep "symbol \`H5Fcreate'" || true)
echo "$bindings"
[ -n "$bindings" ] || fail "no binding of H5Fcreate from libaccelerate-hpc recorded"
grep -q 'serial' <<<"$bindings" && fail "libaccelerate-hpc's H5Fcreate binds to a serial HDF5"
grep -Eq 'libhdf5(_openmpi|_mpich)?\.so' <<<"$bindings" || fail "H5Fcreate binds to an unexpected library"
echo "HDF5 tools OK"
