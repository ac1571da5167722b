#!/usr/bin/env bash
# The big-model utilities against Hugging Face Accelerate's own: runs
# module_sizes_dump (our results on the C++ trees) and
# module_sizes_crosscheck.py (Accelerate's on the same trees in torch.nn),
# which compares them; then each side reads the other's offload folder. Accelerate is pinned and installed into a venv on top
# of Debian's python3-torch; exit 77 (skipped) with the reason where it cannot be.
# usage: module_sizes_crosscheck.sh <module_sizes_dump> <scratch-dir>
set -euo pipefail
dump=${1:?usage: module_sizes_crosscheck.sh <module_sizes_dump> <scratch-dir>}
scratch=${2:?usage: module_sizes_crosscheck.sh <module_sizes_dump> <scratch-dir>}
here=$(cd "$(dirname "$0")" && pwd)
# 0.34.2: the last Accelerate that runs on Debian 12's torch 1.13.
system_python=${ACCELERATE_SYSTEM_PYTHON:-/usr/bin/python3}
if ! "$system_python" -c 'import torch' 2>/dev/null; then
  echo "ACCELERATE_TEST_SKIPPED: $system_python cannot import torch (Debian: python3-torch)"
  exit 77
fi
if ! python=$(ACCELERATE_PYTHON=$system_python "$here/../python_venv.sh" hf-accelerate \
  'from accelerate.utils import compute_module_sizes' --system-site-packages "accelerate==0.34.2"); then
  echo "ACCELERATE_TEST_SKIPPED: Hugging Face Accelerate could not be installed (see the lines above)"
  exit 77
fi
mkdir -p "$scratch"
"$dump" >"$scratch/ours.json"
rm -rf "$scratch/ours_offload" "$scratch/theirs_offload"
"$dump" offload-write "$scratch/ours_offload"
"$python" "$here/module_sizes_crosscheck.py" "$scratch/ours.json" "$scratch/ours_offload" "$scratch/theirs_offload"
"$dump" offload-check "$scratch/theirs_offload"
"$dump" empty >"$scratch/ours_empty.json"
"$python" "$here/module_sizes_crosscheck.py" --empty "$scratch/ours_empty.json"
