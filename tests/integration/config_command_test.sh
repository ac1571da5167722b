#!/usr/bin/env bash
# `accelerate-hpc config`: writes the basic file at the default location under
# HF_HOME, never overwrites it without --force, and `config show` (which reads
# through load_config_file) prints what was written; bad input exits 2 (usage)
# or 1 (bad file) with a message naming the problem.
# usage: config_command_test.sh <accelerate-hpc>
set -uo pipefail
tool=$1
fail() { echo "FAIL: $*" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset ACCELERATE_CONFIG_FILE XDG_CACHE_HOME ACCELERATE_MIXED_PRECISION ACCELERATE_USE_CPU
export HF_HOME=$work/hf
file=$HF_HOME/accelerate/accelerate_hpc_config.yaml

# run <expected exit code> <args...>: captures stdout+stderr in $out.
run() {
  local expected=$1
  shift
  out=$(timeout 30 "$tool" "$@" 2>&1)
  local code=$?
  echo "\$ accelerate-hpc $* -> $code"
  echo "$out"
  [ "$code" -eq "$expected" ] || fail "'$*' exited $code, expected $expected"
}

# 1. Show before anything exists: the default path, its origin, no file.
run 0 config show
grep -qF "config file: $file (from HF_HOME)" <<<"$out" || fail "show does not print the HF_HOME location"
grep -q "does not exist" <<<"$out" || fail "show does not say the file is missing"

# 2. Write the basic configuration.
run 0 config --mixed_precision bf16
[ -f "$file" ] || fail "no file at $file"
grep -qF "wrote $file" <<<"$out" || fail "the command does not say where it wrote"
grep -qx "mixed_precision: 'bf16'" "$file" || fail "file lacks mixed_precision: 'bf16'"
grep -Eqx "use_cpu: (true|false)" "$file" || fail "file lacks use_cpu"

# 3. Show reads it back.
run 0 config show
grep -qx "mixed_precision: bf16" <<<"$out" || fail "show does not print mixed_precision: bf16"
grep -Eqx "use_cpu: (true|false)" <<<"$out" || fail "show does not print use_cpu"
ACCELERATE_MIXED_PRECISION=no run 0 config show
grep -q "mixed_precision: bf16 .*overridden by ACCELERATE_MIXED_PRECISION=no" <<<"$out" ||
  fail "show does not flag the environment override"

# 4. No overwrite without --force: a hand edit survives.
printf "mixed_precision: fp16\nnum_processes: 4  # from Python Accelerate\n" >"$file"
run 0 config --mixed_precision no
grep -q "already exists" <<<"$out" || fail "no 'already exists' message"
grep -qx "mixed_precision: fp16" "$file" || fail "existing file was overwritten"
run 0 config show
grep -qx "mixed_precision: fp16" <<<"$out" || fail "show does not print the edited value"
grep -qx "unknown keys (ignored): num_processes" <<<"$out" || fail "show does not list unknown keys"

# 5. --force replaces it (the --name=value and dashed spellings work too).
run 0 config --mixed-precision=no --force
grep -qx "mixed_precision: 'no'" "$file" || fail "--force did not replace the file"
! grep -q num_processes "$file" || fail "--force kept old content"

# 6. --config_file writes and shows elsewhere; a named missing file is an error.
other=$work/elsewhere/cluster.yaml
run 0 config --config_file "$other" --mixed_precision fp16
grep -qx "mixed_precision: 'fp16'" "$other" || fail "--config_file did not write $other"
run 0 config show --config_file "$other"
grep -qx "mixed_precision: fp16" <<<"$out" || fail "show --config_file does not read $other"
ACCELERATE_CONFIG_FILE=$other run 0 config show
grep -qF "config file: $other (from ACCELERATE_CONFIG_FILE)" <<<"$out" || fail "ACCELERATE_CONFIG_FILE ignored"
run 1 config show --config_file "$work/missing.yaml"
grep -q "does not exist" <<<"$out" || fail "missing named file not reported"

# 7. Ranks of a job may all run it at once: exactly one writes, none fails.
race=$work/race/config.yaml
for i in 1 2 3 4 5 6; do
  timeout 30 "$tool" config --config_file "$race" --mixed_precision bf16 >"$work/race.$i" 2>&1 &
done
wait
wrote=$(cat "$work"/race.* | grep -c "wrote $race" || true)
kept=$(cat "$work"/race.* | grep -c "already exists" || true)
[ "$wrote" -eq 1 ] && [ "$kept" -eq 5 ] || fail "concurrent writers: $wrote wrote, $kept kept (expected 1 and 5)"
[ "$(ls -A "$work/race")" = "config.yaml" ] || fail "temporary files left: $(ls -A "$work/race")"

# 8. Usage errors exit 2 and say what is wrong.
run 2 config --mixed_precision fp8
grep -q "fp8" <<<"$out" || fail "bad mixed precision not named"
run 2 config --bogus
grep -q -- "not expected: --bogus" <<<"$out" || fail "unknown option not named"
run 2 config show --force
run 2 config --mixed_precision

# 9. A malformed file: show exits 1 naming file, line and key.
printf "use_cpu: true\ntimeout: soon\n" >"$file"
run 1 config show
grep -qF "config file '$file', line 2, key 'timeout'" <<<"$out" || fail "error does not name file, line and key"

echo "PASS"
