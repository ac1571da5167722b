#!/usr/bin/env bash
# The aarch64 CRC-32C kernels (crc32c instructions, PMULL folding), built with
# the cross compiler and checked under qemu-user's emulation of a CPU that has
# both extensions, so that CI on x86 runs them too.
# Usage: crc32c_aarch64.sh <source-dir> <scratch-dir>
# Exit 77 (skipped) without the cross compiler or qemu: jobs/setup.sh installs both.
set -euo pipefail
source_dir=${1:?usage: crc32c_aarch64.sh <source-dir> <scratch-dir>}
scratch=${2:?usage: crc32c_aarch64.sh <source-dir> <scratch-dir>}
cxx=${ACCELERATE_AARCH64_CXX:-aarch64-linux-gnu-g++}
for tool in "$cxx" qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "ACCELERATE_TEST_SKIPPED: $tool not found (Debian: g++-aarch64-linux-gnu qemu-user)"
    exit 77
  fi
done
mkdir -p "$scratch"
# Static, so that qemu needs no aarch64 root file system.
"$cxx" -std=c++20 -O2 -static -Wall -Wextra -I"$source_dir/src" \
  "$source_dir/src/detail/crc32c.cpp" "$source_dir/tests/unit/crc32c_cross_check.cpp" \
  -o "$scratch/crc32c_cross_check"
qemu-aarch64 -cpu max "$scratch/crc32c_cross_check" --expect armv8-crc --expect pmull
