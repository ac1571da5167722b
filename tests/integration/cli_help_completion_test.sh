#!/usr/bin/env bash
# accelerate-hpc's generated help and bash completion: --help of the tool and
# of each sub-command exits 0 and lists the options the parsers take, and the
# completion script, sourced into bash, completes sub-commands, options and
# option values.
# usage: cli_help_completion_test.sh <accelerate-hpc>
set -uo pipefail
tool=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

help_of() {  # <expected exit code> <args...>: output in $out
  local expected=$1
  shift
  out=$(timeout 30 "$tool" "$@" 2>&1)
  local code=$?
  [ "$code" -eq "$expected" ] || fail "'accelerate-hpc $*' exited $code, expected $expected: $out"
}

help_of 0 --help
for command in env config inspect convert completion; do
  grep -q "^ *$command " <<<"$out" || fail "--help does not list '$command'"
done
help_of 0 convert --help
for option in --to --output --max-shard-size; do
  grep -q -- "$option" <<<"$out" || fail "convert --help does not list $option"
done
help_of 0 config --help
grep -q -- "--mixed_precision" <<<"$out" || fail "config --help does not list --mixed_precision"
grep -q "Default location" <<<"$out" || fail "config --help lacks the default location"
help_of 0 inspect --help
help_of 2 completion zsh
help_of 2 inspect a b

# The same option spelt --name value and --name=value.
help_of 2 convert x --to=onnx
grep -q "unknown format 'onnx'" <<<"$out" || fail "--to=onnx not parsed as --to onnx"

script=$(mktemp)
trap 'rm -f "$script"' EXIT
"$tool" completion bash >"$script" || fail "completion bash failed"
# complete <expected word> <words...>: the completion of the last word must offer the expected one.
complete_words() {
  local expected=$1
  shift
  local offered
  offered=$(bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _accelerate_hpc
    printf "%s\n" "${COMPREPLY[@]}"' _ "$script" "$@") || fail "the completion function failed for: $*"
  grep -qx -- "$expected" <<<"$offered" || fail "completing '$*' offers [${offered//$'\n'/ }], not $expected"
}
complete_words convert accelerate-hpc conv
complete_words --max-shard-size accelerate-hpc convert ckpt --max
complete_words bf16 accelerate-hpc config --mixed_precision b
complete_words show accelerate-hpc config sh
complete_words safetensors accelerate-hpc convert ckpt --to s
echo PASS
