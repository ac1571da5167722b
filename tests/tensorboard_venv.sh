#!/usr/bin/env bash
# Provide TensorBoard's own Python reader for the tests that open our event
# files: prints the path of a venv's python with the pinned tensorboard wheel
# (tests/python_venv.sh does the work; exit 1 when it cannot, and callers skip).
#
# Environment (optional):
#   ACCELERATE_TENSORBOARD_VERSION  tensorboard version (default below)
#   ACCELERATE_TENSORBOARD_VENV     venv directory
#                                   (default ${XDG_CACHE_HOME:-$HOME/.cache}/accelerate-hpc/tensorboard-venv)
set -euo pipefail

# Pinned so the reader is the same everywhere; 2.21.0 is checked to read our files.
version=${ACCELERATE_TENSORBOARD_VERSION:-2.21.0}
if [[ -n ${ACCELERATE_TENSORBOARD_VENV:-} ]]; then export ACCELERATE_VENV_DIR=$ACCELERATE_TENSORBOARD_VENV; fi
exec "$(dirname "$0")/python_venv.sh" tensorboard 'from tensorboard.backend.event_processing import event_accumulator' \
  "tensorboard==$version"
