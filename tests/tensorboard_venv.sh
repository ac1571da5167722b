#!/usr/bin/env bash
# Provide TensorBoard's own Python reader for the tests that open our event files.
#
# Creates (or reuses) a virtual environment in a cache directory with the pinned
# tensorboard wheel from PyPI, and prints the path of its python on stdout.
# Progress and pip output go to stderr. Exits 1 when it cannot (no python3 venv
# module, no network): callers skip with that reason.
#
# Environment (optional):
#   ACCELERATE_TENSORBOARD_VERSION  tensorboard version (default below)
#   ACCELERATE_TENSORBOARD_VENV     venv directory
#                                   (default ${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/tensorboard-venv)
set -euo pipefail

# Pinned so the reader is the same everywhere; 2.21.0 is checked to read our files.
version=${ACCELERATE_TENSORBOARD_VERSION:-2.21.0}
venv=${ACCELERATE_TENSORBOARD_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/tensorboard-venv}

log() { printf 'tensorboard_venv: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$(dirname "$venv")"
# Tests running side by side must not install into the same venv at once.
exec 9>"$venv.lock"
flock 9

stamp=$venv/.accelerate-tensorboard-stamp
if [[ -f $stamp && $(<"$stamp") == "$version" ]]; then
  log "reusing $venv (tensorboard $version)"
else
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || die "python3 has no venv module (install python3-venv)"
  # Delete only a directory that is a venv (ACCELERATE_TENSORBOARD_VENV may be mistyped).
  [[ ! -e $venv || -f $venv/pyvenv.cfg || -z $(ls -A "$venv") ]] || die "$venv exists and is not a venv; not deleting it"
  log "creating $venv (tensorboard $version)"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || die "python3 -m venv $venv failed"
  "$venv/bin/python" -m pip --disable-pip-version-check --no-input --no-cache-dir install -q \
    "tensorboard==$version" >&2 || die "pip could not install tensorboard==$version (is PyPI reachable?)"
  printf '%s\n' "$version" >"$stamp"
fi
"$venv/bin/python" -c 'from tensorboard.backend.event_processing import event_accumulator' ||
  die "the tensorboard in $venv does not import"
printf '%s\n' "$venv/bin/python"
