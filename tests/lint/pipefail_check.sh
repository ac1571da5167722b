#!/usr/bin/env bash
# No shell script of the project that runs under `set -o pipefail` pipes a
# command into `grep -q`. grep -q stops reading at its first match; a writer
# that has more to say then dies of SIGPIPE, pipefail makes the pipeline
# fail, and the test reads "no match" at random (seen: `mpiexec --version |
# grep -q HYDRA` missed 11 times in 300). Read the text whole first:
#     grep -q PATTERN <<<"$(command)"
#
# usage: pipefail_check.sh <source root>
set -uo pipefail
root=${1:?usage: pipefail_check.sh <source root>}
cd "$root" || exit 2
mapfile -t scripts < <(git ls-files '*.sh' .ci/run 2>/dev/null || find . -name '*.sh' -not -path './build*')
if [ ${#scripts[@]} -eq 0 ]; then
  echo "pipefail_check: no shell scripts under $root"
  exit 1
fi
bad=0
for script in "${scripts[@]}"; do
  grep -q 'set -[a-z]*o pipefail\|set -o pipefail' "$script" || continue
  # A pipe (not ||) into grep whose options include q (-q, -qE, --quiet),
  # outside comments.
  if hits=$(grep -nE '(^|[^|])\|[[:space:]]*grep[[:space:]]+(-[a-zA-Z]*q|--quiet)' "$script" |
    grep -vE '^[0-9]+:[[:space:]]*#'); then
    while IFS= read -r hit; do echo "$script:$hit"; done <<<"$hits"
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "pipefail_check: the lines above pipe into grep -q under pipefail; use grep -q PATTERN <<<\"\$(command)\""
  exit 1
fi
echo "pipefail_check: ${#scripts[@]} scripts, none pipes into grep -q under pipefail"
