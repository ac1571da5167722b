#!/usr/bin/env bash
# CRC-32C throughput on one core: in cache (1 MiB) and from memory (256 MiB),
# every kernel of this CPU beside a plain read, medians of interleaved rounds.
# Usage: bench/checksum/run.sh <build-dir> [bench_checksum options]
set -euo pipefail
build=${1:?usage: run.sh <build-dir> [options]}
shift
bin=$build/bench/checksum/bench_checksum
[ -x "$bin" ] || cmake --build "$build" --target bench_checksum -j2
out=${OUT:-$build/bench/checksum}
mkdir -p "$out"
# One core, the first the scheduler lets us have, so that the rounds do not migrate.
core=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
exec taskset -c "$core" "$bin" --json "$out/checksum.json" "$@"
