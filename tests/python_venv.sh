#!/usr/bin/env bash
# Provide another project's Python package for the tests that check our
# results with its own code (TensorBoard's reader, Hugging Face Accelerate).
#
# Creates (or reuses) a virtual environment in a cache directory with the
# pinned requirements from PyPI, checks that `import_check` runs in it, and
# prints the path of its python on stdout. Progress and pip output go to
# stderr. Exits 1 when it cannot (no venv module, no network, the import
# fails): callers skip with that reason.
#
# usage: python_venv.sh <name> <import_check> [--system-site-packages] <requirement>...
# Environment (optional):
#   ACCELERATE_PYTHON    interpreter the venv is made from (default: python3)
#   ACCELERATE_VENV_DIR  venv directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/<name>-venv)
set -euo pipefail

name=${1:?usage: python_venv.sh <name> <import_check> [--system-site-packages] <requirement>...}
import_check=${2:?usage: python_venv.sh <name> <import_check> [--system-site-packages] <requirement>...}
shift 2
venv_args=()
if [[ ${1:-} == --system-site-packages ]]; then
  venv_args+=(--system-site-packages)
  shift
fi
(($# > 0)) || { echo "usage: python_venv.sh <name> <import_check> [--system-site-packages] <requirement>..." >&2; exit 2; }
python=${ACCELERATE_PYTHON:-python3}
venv=${ACCELERATE_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/$name-venv}

log() { printf '%s_venv: %s\n' "$name" "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$(dirname "$venv")"
# Tests running side by side must not install into the same venv at once.
exec 9>"$venv.lock"
flock 9

stamp=$venv/.accelerate-stamp
wanted="$python ${venv_args[*]} $*"
if [[ -f $stamp && $(<"$stamp") == "$wanted" ]]; then
  log "reusing $venv ($*)"
else
  "$python" -c 'import venv, ensurepip' >/dev/null 2>&1 || die "$python has no venv module (install python3-venv)"
  # Delete only a directory that is a venv (ACCELERATE_VENV_DIR may be mistyped).
  [[ ! -e $venv || -f $venv/pyvenv.cfg || -z $(ls -A "$venv") ]] || die "$venv exists and is not a venv; not deleting it"
  log "creating $venv ($*)"
  rm -rf "$venv"
  "$python" -m venv "${venv_args[@]}" "$venv" >&2 || die "$python -m venv $venv failed"
  "$venv/bin/python" -m pip --disable-pip-version-check --no-input --no-cache-dir install -q "$@" >&2 ||
    die "pip could not install $* (is PyPI reachable?)"
  printf '%s\n' "$wanted" >"$stamp"
fi
"$venv/bin/python" -c "$import_check" || die "'$import_check' fails in $venv"
printf '%s\n' "$venv/bin/python"
