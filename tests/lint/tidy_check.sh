#!/usr/bin/env bash
# clang-tidy's curated checks (.clang-tidy) over the given sources and the
# headers of src/ and include/ they include. ctest passes the parsers of
# untrusted bytes (the JSON manifests and safetensors headers, the
# configuration file, the command line, the environment): the LibTorch-free
# translation units that are also fuzzed (tests/fuzz/CMakeLists.txt). A
# whole-tree run parses LibTorch's headers a hundred times, about 40 minutes
# on 2 cores, and is run by hand (docs/testing.md, "Lint").
#
# usage: tidy_check.sh <source root> <build dir> <source>...
# Exits 1 on any finding, 77 (skip) without clang-tidy.
set -uo pipefail
root=${1:?usage: tidy_check.sh <source root> <build dir> <source>...}
build=${2:?usage: tidy_check.sh <source root> <build dir> <source>...}
tidy=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}
if [ -z "$tidy" ]; then
  echo "SKIP: clang-tidy is not installed (Debian: apt-get install clang-tidy)"
  exit 77
fi
cd "$root" || exit 2
sources=("${@:3}")
if [ ${#sources[@]} -eq 0 ]; then
  echo "tidy_check: no sources given"
  exit 2
fi
# The flags of the fuzz parsers' build: C++20, the generated config.hpp, and
# MPI's headers (ACCELERATE_TIDY_INCLUDES, set by ctest from CMake's FindMPI).
flags=(-std=c++20 -Iinclude "-I$build/include" -Isrc)
IFS=';' read -r -a includes <<<"${ACCELERATE_TIDY_INCLUDES:-}"
for dir in "${includes[@]}"; do [ -n "$dir" ] && flags+=("-isystem" "$dir"); done
failed=0
pids=()
logs=()
# Two at a time: each file parses its own headers.
for source in "${sources[@]}"; do
  log=$(mktemp)
  logs+=("$log")
  "$tidy" --quiet "$source" -- "${flags[@]}" >"$log" 2>&1 &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
for log in "${logs[@]}"; do
  grep -v "warnings generated\|^Suppressed\|^Use -header-filter\|^$" "$log" || true
  rm -f "$log"
done
if [ $failed -ne 0 ]; then
  echo "tidy_check: findings above (.clang-tidy's checks; every one is an error)"
  exit 1
fi
echo "tidy_check: ${#sources[@]} files clean ($("$tidy" --version | grep -o 'version [0-9.]*'))"
