#!/usr/bin/env bash
# The big-model demonstration: bench_big_model trains an MLP whose data-
# parallel training does not fit in this machine's memory with ZeRO stage 2
# (SHARD_GRAD_OP) on NP ranks, saves it, then resumes it on one rank without
# sharding. Checks that the loss falls in both phases and that the resumed
# model gives rank 0's batch the loss the sharded run ended with; prints a
# summary and writes OUTDIR/big_model.jsonl.
#
#   bench/sharded/big_model.sh OUTDIR [--width 8192 --layers 13 --batch 4]
#
# Environment:
#   BUILD_DIR    build tree holding bench/sharded/bench_big_model (default <repo>/build)
#   NP           ranks of the sharded phase (default 2)
#   STEPS        steps of the sharded phase (default 4); the resumed phase runs 2
#   MPIEXEC      launcher (default mpirun)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
outdir=$1
shift
build=${BUILD_DIR:-$repo/build}
exe=$build/bench/sharded/bench_big_model
mpiexec=${MPIEXEC:-mpirun}
np=${NP:-2}
steps=${STEPS:-4}
if [[ ! -x $exe ]]; then
  echo "big_model.sh: $exe not found. Build it first:" >&2
  echo "  cmake -S $repo -B $build && cmake --build $build -j2 --target bench_big_model" >&2
  exit 2
fi
mkdir -p "$outdir"
log=$outdir/big_model.jsonl
checkpoint=$outdir/checkpoint
rm -rf "$checkpoint"
launcher_flags=()
if grep -q 'Open MPI' <<<"$("$mpiexec" --version 2>/dev/null || true)"; then
  launcher_flags+=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && launcher_flags+=(--allow-run-as-root)
fi

echo "== machine =="
echo "cpu: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GB", $2 * 1024 / 1e9}' /proc/meminfo)"
echo "cores online: $(nproc --all)"
echo
echo "== $np ranks, SHARD_GRAD_OP: train $steps steps, save =="
"$mpiexec" "${launcher_flags[@]}" -np "$np" "$exe" --phase train --strategy SHARD_GRAD_OP --steps "$steps" \
  --checkpoint "$checkpoint" "$@" | tee "$log"
echo
echo "== 1 rank, NO_SHARD: load, train 2 steps =="
"$mpiexec" "${launcher_flags[@]}" -np 1 "$exe" --phase resume --strategy NO_SHARD --steps 2 \
  --checkpoint "$checkpoint" "$@" | tee -a "$log"
echo
echo "checkpoint on disk: $(du -sh "$checkpoint" | cut -f1)"

python3 - "$log" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
train = [e for e in events if e.get("phase") == "train" and e["event"] == "step"]
resumed = [e for e in events if e.get("phase") == "resume" and e["event"] == "step"]
done = {e["phase"]: e for e in events if e["event"] == "done"}
loaded = next(e for e in events if e["event"] == "loaded")
problems = []
if len(train) < 2 or not train[-1]["loss"] < train[0]["loss"]:
    problems.append("the sharded run's loss did not fall")
if len(resumed) < 2 or not resumed[-1]["loss"] < resumed[0]["loss"]:
    problems.append("the resumed run's loss did not fall")
expected, got = done["train"]["rank0_loss"], loaded["rank0_loss"]
if abs(got - expected) > 1e-5 * abs(expected):
    problems.append(f"the resumed model gives rank 0's batch loss {got}, the sharded run ended at {expected}")
t = done["train"]
memory = t["system memory"] if "system memory" in t else None
print(f"parameters: {t['parameters'] / 1e6:.0f} M; {t['ranks']} ranks with SHARD_GRAD_OP")
print(f"peak RSS: {t['peak_rss_mb_largest_rank']:.0f} MB on the largest rank, "
      f"{t['peak_rss_mb_all_ranks']:.0f} MB over all ranks")
print(f"data parallelism would hold {t['ddp_tensor_mb_all_ranks']:.0f} MB of weights, gradients and Adam "
      "moments over the same ranks, before activations and runtime")
print(f"loss: {train[0]['loss']:.6g} -> {train[-1]['loss']:.6g} sharded; resumed on 1 rank at "
      f"{got:.9g} (saved run: {expected:.9g}) -> {resumed[-1]['loss']:.6g}")
print(f"save_state: {t['save_seconds']:.1f} s; 1-rank peak RSS {done['resume']['peak_rss_mb_largest_rank']:.0f} MB")
if problems:
    print("FAILED: " + "; ".join(problems))
    sys.exit(1)
print("ok")
PY
