#!/usr/bin/env bash
# Fuzzes the readers of untrusted bytes with libFuzzer (docs/fuzzing.md).
#
#   tests/fuzz/run.sh [--seconds N] [--jobs J] [harness...]
#
# Configures a separate clang build (default build-fuzz/ in the source tree,
# or $ACCELERATE_FUZZ_BUILD_DIR) with -DACCELERATE_FUZZ=ON (libFuzzer, ASan,
# UBSan), builds the harnesses and runs each for N seconds (default 60), one
# after the other, starting from tests/fuzz/corpus/<harness>. New inputs go to
# <build>/fuzz/corpus/<harness>; crash, timeout and out-of-memory inputs to
# <build>/fuzz/crashes/<harness>/. Exits non-zero when any harness found
# something. Harnesses: json safetensors safetensors_index manifest
# config_file cli_arguments checkpoint_h5 checkpoint_h5_edits. The last two
# need the library, which clang 14 cannot build against LibTorch 1.13: they
# are built in the normal build directory ($ACCELERATE_BUILD_DIR, default build/; configured if absent)
# with libFuzzer's runtime linked in, guided by the errors it reaches rather
# than by coverage, and without the sanitizers.
set -euo pipefail

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=${ACCELERATE_FUZZ_BUILD_DIR:-$source_dir/build-fuzz}
normal_build_dir=${ACCELERATE_BUILD_DIR:-$source_dir/build}
seconds=60
jobs=2
all=(json safetensors safetensors_index manifest config_file cli_arguments checkpoint_h5 checkpoint_h5_edits)
harnesses=()

usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
  if [[ ! -d $source_dir/tests/fuzz/corpus/$h ]]; then
    echo "run.sh: no harness '$h'; the harnesses are: ${all[*]}" >&2
    exit 2
  fi
done
command -v clang++ >/dev/null || { echo "run.sh: clang++ not found (libFuzzer needs clang)" >&2; exit 2; }

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
clang_targets=()
normal_targets=()
for h in "${harnesses[@]}"; do
  if [[ $h == checkpoint_h5* ]]; then normal_targets+=("fuzz_$h"); else clang_targets+=("fuzz_$h"); fi
done
if [[ ${#clang_targets[@]} -gt 0 ]]; then
  if [[ ! -f $build_dir/CMakeCache.txt ]]; then
    cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DACCELERATE_FUZZ=ON \
      -DACCELERATE_BUILD_BENCH=OFF -DACCELERATE_BUILD_JOBS=OFF -DACCELERATE_BUILD_DOCS=OFF
  fi
  cmake --build "$build_dir" --parallel "$jobs" --target "${clang_targets[@]}"
fi
if [[ ${#normal_targets[@]} -gt 0 ]]; then
  [[ -f $normal_build_dir/CMakeCache.txt ]] ||
    cmake -S "$source_dir" -B "$normal_build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}"
  cmake --build "$normal_build_dir" --parallel "$jobs" --target "${normal_targets[@]}"
fi

status=0
summary=()
for h in "${harnesses[@]}"; do
  corpus=$build_dir/fuzz/corpus/$h
  crashes=$build_dir/fuzz/crashes/$h
  log=$build_dir/fuzz/$h.log
  mkdir -p "$corpus" "$crashes"
  flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
         -artifact_prefix="$crashes/")
  # MPI and LibTorch keep allocations until exit: leak checking only where
  # the harness links neither.
  asan=detect_leaks=1
  binary=$build_dir/tests/fuzz/fuzz_$h
  if [[ $h == checkpoint_h5* ]]; then
    flags+=(-close_fd_mask=1)
    [[ $h == checkpoint_h5_edits ]] && flags+=(-max_len=256 -len_control=0)  # several edits from the start
    binary=$normal_build_dir/tests/fuzz/fuzz_$h
  fi
  echo "== $h: ${seconds}s, log $log"
  start=$(date +%s)
  set +e
  ASAN_OPTIONS=$asan:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$binary" "${flags[@]}" "$corpus" "$source_dir/tests/fuzz/corpus/$h" >"$log" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(find "$crashes" -type f | wc -l)
  summary+=("$h: rc $rc, ${wall}s, ${execs:-?} executions, $found finding(s) in $crashes")
  if [[ $rc -ne 0 || $found -ne 0 ]]; then
    status=1
    grep -m 5 -E "ERROR|runtime error|fuzz finding|deadly signal|Test unit written" "$log" || true
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
