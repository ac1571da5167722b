#!/usr/bin/env bash
# The sources of src/ and include/ are formatted as .clang-format says.
# Prints clang-format's complaints (file:line and the expected layout) and
# exits 1 when a file differs; exits 77 (skip) without clang-format.
#
# usage: format_check.sh <source root>      fix with: clang-format -i <file>
set -uo pipefail
root=${1:?usage: format_check.sh <source root>}
format=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$format" ]; then
  echo "SKIP: clang-format is not installed (Debian: apt-get install clang-format)"
  exit 77
fi
cd "$root" || exit 2
mapfile -t files < <(find src include -type f \( -name '*.cpp' -o -name '*.hpp' \) | sort)
if [ ${#files[@]} -eq 0 ]; then
  echo "format_check: no sources under $root/src or $root/include"
  exit 1
fi
if "$format" --dry-run --Werror --style=file "${files[@]}"; then
  echo "format_check: ${#files[@]} files match .clang-format ($("$format" --version))"
  exit 0
fi
echo "format_check: the files above differ from .clang-format; run clang-format -i on them"
exit 1
