#!/usr/bin/env bash
# save_model output is read by Python's safetensors (single file and shards
# with model.safetensors.index.json), and a file written by Python's
# safetensors loads through load_checkpoint_in_model (file, index, folder).
# Skips (77) when no Python with safetensors and numpy is available; set
# ACCELERATE_SAFETENSORS_PYTHON or create the venv:
#   python3 -m venv ~/.cache/accelerate-hpc/safetensors-venv
#   ~/.cache/accelerate-hpc/safetensors-venv/bin/pip install safetensors numpy
# Usage: checkpoint_safetensors_test.sh <checkpoint_job>
set -euo pipefail
# The program is also started without a launcher (MPI singleton), which Open MPI refuses as root unless allowed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
job=$1
python=${ACCELERATE_SAFETENSORS_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/safetensors-venv/bin/python}
if ! "$python" -c "import safetensors, numpy" 2>/dev/null; then
  echo "ACCELERATE_TEST_SKIPPED: no Python with safetensors and numpy at $python"
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/accelerate_safetensors.XXXXXX")
trap 'rm -rf "$dir"' EXIT

"$job" export "$dir/single" 10000000000
"$job" export "$dir/sharded" 1000000   # ~1 MB shards: several files + index

"$python" - "$dir" <<'PY'
import json, os, sys
import numpy as np
from safetensors import safe_open
d = sys.argv[1]
def expect(name, shape, dtype, salt):
    n = int(np.prod(shape))
    v = np.cos(np.arange(n, dtype=np.float64) * (0.001 * (salt + 1)) + 1).reshape(shape)
    return v > 0 if dtype == "bool" else v.astype(dtype)
params = [("fc1.weight", (512, 1024), "float32"), ("fc1.bias", (512,), "float32"),
          ("fc2.weight", (10, 512), "bfloat16"), ("fc2.bias", (10,), "float16"),
          ("embedding.weight", (1000, 300), "float64"), ("mask", (7, 3), "bool")]
def check(files_for):
    for salt, (name, shape, dtype) in enumerate(params):
        with safe_open(files_for(name), framework="numpy") as f:
            if dtype == "bfloat16":  # numpy has no bfloat16: check the header only
                s = f.get_slice(name)
                assert s.get_dtype() == "BF16" and list(s.get_shape()) == list(shape), name
                continue
            got = f.get_tensor(name)
            assert got.shape == shape, (name, got.shape)
            want = expect(name, shape, dtype, salt)
            assert got.dtype == want.dtype, (name, got.dtype)
            if dtype == "bool":
                assert np.array_equal(got, want), name
            else:  # torch's and numpy's cos differ in the last bits; fp16 rounds via float32
                assert np.allclose(got, want, rtol=1e-3 if dtype == "float16" else 1e-6, atol=1e-6), name
single = os.path.join(d, "single", "model.safetensors")
check(lambda name: single)
index = json.load(open(os.path.join(d, "sharded", "model.safetensors.index.json")))
shards = sorted(set(index["weight_map"].values()))
assert len(shards) > 1 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors", shards
assert index["metadata"]["total_size"] == 512*1024*4 + 512*4 + 10*512*2 + 10*2 + 1000*300*8 + 21
check(lambda name: os.path.join(d, "sharded", index["weight_map"][name]))

from safetensors.numpy import save_file
os.makedirs(os.path.join(d, "py"))
save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2, 3], dtype=np.int64)},
          os.path.join(d, "py", "model.safetensors"))
os.makedirs(os.path.join(d, "pysharded"))
save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, os.path.join(d, "pysharded", "model-00001-of-00002.safetensors"))
save_file({"b": np.array([1, 2, 3], dtype=np.int64)}, os.path.join(d, "pysharded", "model-00002-of-00002.safetensors"))
json.dump({"metadata": {"total_size": 48}, "weight_map": {"a": "model-00001-of-00002.safetensors",
           "b": "model-00002-of-00002.safetensors"}}, open(os.path.join(d, "pysharded", "model.safetensors.index.json"), "w"))
print("python side OK")
PY

"$job" import "$dir/py/model.safetensors"
"$job" import "$dir/py"
"$job" import "$dir/pysharded/model.safetensors.index.json"
"$job" import "$dir/pysharded"
echo "safetensors interop OK"
