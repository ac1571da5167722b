#!/usr/bin/env bash
# One report per error per job: ranks that raise the same error print it once,
# with the list of ranks; different errors are each printed once; an error on
# one rank while the others wait in a barrier is printed in full and ends the
# job promptly (error_report_job.cpp).
# usage: error_report_test.sh <same|different|one_first|one_last> <nprocs> <program> <mpiexec> [mpiexec flags...]
set -euo pipefail
scenario=$1 nprocs=$2 program=$3 mpiexec=$4
shift 4
fail() { echo "FAIL: $*" >&2; exit 1; }
last=$((nprocs - 1))

case $scenario in
  same | different) args=("$scenario") ;;
  one_first) args=(one 0) ;;
  one_last) args=(one "$last") ;;
  *) fail "unknown scenario $scenario" ;;
esac

start=$(date +%s)
rc=0
out=$(timeout 60 "$mpiexec" -n "$nprocs" "$@" "$program" "${args[@]}" 2>&1) || rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out"
echo "exit code $rc after ${elapsed}s"
[ "$rc" -ne 124 ] || fail "the job hung until the test's own timeout"
[ "$rc" -ne 0 ] || fail "the job succeeded although ranks raised errors"
# The barrier's timeout is 600 s: only the abort can have ended the job this soon.
[ "$elapsed" -lt 30 ] || fail "the abort took ${elapsed}s"
if grep -q "left the barrier\|TimeoutError\|collective timeout" <<<"$out"; then fail "a barrier ended by itself"; fi

count() { grep -cF -- "$1" <<<"$out" || true; }
once() { [ "$(count "$1")" -eq 1 ] || fail "expected '$1' exactly once, found $(count "$1") times"; }

# "0,2,4" / "1,3" (a single rank is written as it is)
ranks_of() {
  local parity=$1 list="" r
  for ((r = parity; r < nprocs; r += 2)); do list+="${list:+,}$r"; done
  echo "$list"
}

case $scenario in
  same)
    [ "$(count "aborting the job")" -eq 1 ] || fail "the common error was not printed exactly once"
    # The rank list stands in for the prefix, outside and inside the message.
    grep -qE "^\[ranks 0-$last/$nprocs on [^]]+\] aborting the job: error_report_job: \[ranks 0-$last/$nprocs on [^]]+\] load_state: the checkpoint does not match" <<<"$out" ||
      fail "the report does not name ranks 0-$last"
    once "  missing keys: layer.weight"
    once "Load a checkpoint of this model, or pass strict = false."
    ;;
  different)
    [ "$(count "aborting the job")" -eq 2 ] || fail "expected two reports, one per distinct error"
    for parity in 0 1; do
      list=$(ranks_of $parity)
      word=ranks
      [[ $list == *,* ]] || word=rank
      text="even ranks: the data file is missing."
      [ "$parity" -eq 0 ] || text="odd ranks: the data file is truncated."
      grep -qE "^\[$word $list/$nprocs on [^]]+\] aborting the job: error_report_job: \[$word $list/$nprocs on [^]]+\] $text" <<<"$out" ||
        fail "the error of ranks $list is not reported under their list"
      once "$text"
    done
    once "  path: data/even.bin"
    once "  path: data/odd.bin"
    ;;
  one_first | one_last)
    failing=0
    [ "$scenario" = one_first ] || failing=$last
    [ "$(count "aborting the job")" -eq 1 ] || fail "the error was not printed exactly once"
    grep -qE "\[rank $failing/$nprocs on [^]]+\] aborting the job: error_report_job: \[rank $failing/$nprocs on [^]]+\] only this rank failed: out of memory." <<<"$out" ||
      fail "rank $failing's message is not printed in full with its prefix"
    once "  requested: 4096 MiB"
    if [ "$scenario" = one_first ]; then
      # Rank 0 reported and the others did not: it says which ranks were silent.
      others="1-$last"
      word=ranks
      [ "$last" -gt 1 ] || { others=1; word=rank; }
      grep -qE "\[rank 0/$nprocs on [^]]+\] error report: $word $others sent no report within" <<<"$out" ||
        fail "rank 0 does not name the ranks that sent no report"
    fi
    ;;
esac
echo "PASS"
