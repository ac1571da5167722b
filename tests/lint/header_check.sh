#!/usr/bin/env bash
# Every public header compiles on its own: a translation unit that includes
# just that header, parsed with -fsyntax-only under the flags a program using
# the library gets (the accelerate target's include directories, definitions
# and options, LibTorch's and MPI's among them; ctest passes them from CMake).
# A header that compiles only after another one (an include it forgot, a type
# it uses that only a sibling brings in) fails here, with its name and the
# compiler's first error. Two headers at a time.
#
# usage: header_check.sh <source root> <compiler> <flags file> [<skipped folder>...]
#   <flags file>     one compiler flag per line (tests/lint/CMakeLists.txt writes it)
#   <skipped folder> a folder of include/accelerate/ left out (interop without Kokkos)
# ACCELERATE_IMPLICIT_INCLUDES: the compiler's own include directories
# (CMake's CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES), dropped from the flags as
# CMake drops them: passing /usr/include with -I breaks the C++ library's
# #include_next.
set -uo pipefail
usage="usage: header_check.sh <source root> <compiler> <flags file> [<skipped folder>...]"
root=${1:?$usage}
compiler=${2:?$usage}
flags_file=${3:?$usage}
skipped=("${@:4}")
cd "$root" || exit 2

IFS=';' read -r -a implicit <<<"${ACCELERATE_IMPLICIT_INCLUDES:-}"
is_implicit() {  # <dir>, compared once resolved (/usr/lib/../include is /usr/include)
  local dir resolved
  resolved=$(realpath -m "$1")
  for dir in "${implicit[@]}"; do [ "$resolved" = "$(realpath -m "$dir")" ] && return 0; done
  return 1
}
flags=()
while IFS= read -r flag; do
  case $flag in
    "" | -I | -D) ;;  # an empty list's prefix
    -I*) is_implicit "${flag#-I}" || flags+=("$flag") ;;
    *) flags+=("$flag") ;;
  esac
done <"$flags_file"

mapfile -t headers < <(cd include && find accelerate -name '*.hpp' | sort)
for folder in "${skipped[@]}"; do
  mapfile -t headers < <(printf '%s\n' "${headers[@]}" | grep -v "^accelerate/$folder/")
done
if [ ${#headers[@]} -eq 0 ]; then
  echo "header_check: no headers under $root/include/accelerate"
  exit 2
fi
# A header made of nothing but includes of the library's own headers (the
# umbrella, interop/kokkos.hpp) compiles alone whenever those do: it is left
# out, which saves the longest compilations (tests/package builds the umbrella).
only_includes() {
  ! grep -vqE '^[[:space:]]*(//.*)?$|^#pragma once|^#include [<"]accelerate/[^>"]+[>"]$|^#(if|ifdef|ifndef|elif|else|endif)\b' \
    "include/$1"
}
checked=()
aggregates=0
for header in "${headers[@]}"; do
  if only_includes "$header"; then
    aggregates=$((aggregates + 1))
  else
    checked+=("$header")
  fi
done
headers=("${checked[@]}")

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
check() {  # <index> <header>: the compiler's output in $logs/<index>
  printf '#include <%s>\n' "$2" | "$compiler" -x c++ -fsyntax-only "${flags[@]}" - >"$logs/$1" 2>&1 ||
    echo "<stdin>: error: the compiler exited with status $?" >>"$logs/$1"
}
start=$SECONDS
running=0
for i in "${!headers[@]}"; do
  if [ $running -ge 2 ]; then
    wait -n  # a slot frees as soon as either compilation ends
    running=$((running - 1))
  fi
  check "$i" "${headers[$i]}" &
  running=$((running + 1))
done
wait

failed=0
for i in "${!headers[@]}"; do
  first=$(grep -m1 -E ': (fatal )?error: ' "$logs/$i")
  if [ -n "$first" ]; then
    echo "${headers[$i]} does not compile on its own: $first"
    failed=$((failed + 1))
  fi
done
if [ $failed -ne 0 ]; then
  echo "header_check: $failed of ${#headers[@]} headers need another header's includes (above)"
  exit 1
fi
echo "header_check: ${#headers[@]} headers compile on their own, $aggregates that only include them left out" \
  "($((SECONDS - start)) s, $("$compiler" --version | head -n1))"
