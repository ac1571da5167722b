#!/usr/bin/env bash
# Runs the checkpoint benchmark for a 256 MiB and a 1 GiB state at 1, 2 and 4
# ranks and writes one JSON file per run next to the printed tables.
# Usage: bench/checkpoint/run.sh <build-dir> [scratch-dir]
# Cold reads need root (the page cache is dropped between write and read).
#
# Each rank owns an equal share of the machine's cores, as under
# `srun --cpus-per-task` (with Open MPI: --map-by slot:PE=<cores per rank>);
# with more ranks than cores they share all cores unbound.
set -euo pipefail
build=${1:?usage: run.sh <build-dir> [scratch-dir]}
scratch=${2:-${TMPDIR:-/tmp}/accelerate_bench_checkpoint}
bin=$build/bench/checkpoint/bench_checkpoint
[ -x "$bin" ] || cmake --build "$build" --target bench_checkpoint -j2
mpiexec=${MPIEXEC:-mpirun}
cores=$(nproc)
openmpi=0
grep -q "Open MPI" <<<"$("$mpiexec" --version 2>&1 || true)" && openmpi=1
out=${OUT:-$build/bench/checkpoint}
# A VM's balloon driver may hand freed guest memory back to the host (Linux's
# free page reporting); the next write into the page cache then waits for the
# host to back those pages again, by 2-3x in some rounds and not others. Off
# for the run where the kernel lets us (an order above the largest free block
# reports nothing; mainline kernels refuse such an order, and reporting then
# stays on), restored after. -1: no balloon device, nothing to do.
reporting=/sys/module/page_reporting/parameters/page_reporting_order
saved_order=$(cat "$reporting" 2>/dev/null || echo -1)
if [ -w "$reporting" ] && [ "$saved_order" -ge 0 ] && [ "$saved_order" -le 10 ]; then
  if echo 11 2>/dev/null > "$reporting"; then
    trap 'echo "$saved_order" > "$reporting"' EXIT
  else
    echo "run.sh: free page reporting left on (the kernel refuses order 11); timings may vary" >&2
  fi
fi
for size in 256 1024; do
  for n in 1 2 4; do
    flags=()
    if [ "$openmpi" = 1 ]; then
      [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
      if [ "$n" -le "$cores" ]; then
        flags+=(--map-by "slot:PE=$((cores / n))" --bind-to core)
      else
        flags+=(--oversubscribe --bind-to none)
      fi
    fi
    "$mpiexec" -n "$n" "${flags[@]}" "$bin" --dir "$scratch" --size-mib "$size" --repeat "${REPEAT:-3}" \
      --json "$out/checkpoint_${size}MiB_np${n}.json"
  done
done
