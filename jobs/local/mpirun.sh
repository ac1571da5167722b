#!/usr/bin/env bash
# Training on one machine (a workstation, or an interactive allocation) with
# mpirun: jobs/train/train on N ranks, checkpointing as it goes; Ctrl-C or
# `kill -USR1 <pid of this script>` makes it checkpoint and stop, and running
# the same command again continues from there.
#
# usage: jobs/local/mpirun.sh [--np=N] [training options...]
#   jobs/local/mpirun.sh --np=4 --epochs 5 --batch-size 64
#   TRAIN_PROGRAM=/path/to/train PROJECT_DIR=run1 jobs/local/mpirun.sh
#
# The script adds --project-dir, --checkpoint-every and --resume unless given.
# Environment (all optional):
#   TRAIN_PROGRAM     the training binary (default: the build directory next to
#                     this script's checkout, build/jobs/train/train)
#   PROJECT_DIR       checkpoints and outputs (default: train-output)
#   CHECKPOINT_EVERY  optimizer steps between checkpoints (default: 500)
#   MPIRUN            the launcher (default: mpirun; e.g. mpiexec.mpich for MPICH)
#   MPIRUN_FLAGS      extra launcher flags, split on spaces (e.g. "--bind-to core")
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
np=2
args=()
for arg in "$@"; do
  case "$arg" in
    --np=*) np=${arg#--np=} ;;
    *) args+=("$arg") ;;
  esac
done
[[ $np =~ ^[1-9][0-9]*$ ]] || { echo "mpirun.sh: --np needs a positive number, got '$np'" >&2; exit 2; }
program=${TRAIN_PROGRAM:-$root/build/jobs/train/train}
[[ -x $program ]] || { echo "mpirun.sh: no executable at '$program' (build it: cmake --build build --target accelerate_train_job, or set TRAIN_PROGRAM)" >&2; exit 2; }

has_option() {  # <--name> <args...>
  local name=$1; shift
  local a
  for a in "$@"; do [[ $a == "$name" || $a == "$name="* ]] && return 0; done
  return 1
}
has_option --project-dir "${args[@]}" || args+=(--project-dir "${PROJECT_DIR:-train-output}")
has_option --checkpoint-every "${args[@]}" || args+=(--checkpoint-every "${CHECKPOINT_EVERY:-500}")
has_option --resume "${args[@]}" || args+=(--resume)

launcher=${MPIRUN:-mpirun}
read -r -a launcher_flags <<<"${MPIRUN_FLAGS:-}"
# The version text is read whole first: under pipefail, `--version | grep -q`
# fails at random when grep stops reading before the launcher ends its output.
launcher_version=$("$launcher" --version 2>&1 || true)
if grep -q "Open MPI\|OpenRTE" <<<"$launcher_version"; then
  # More ranks than cores is fine for trying things out; as root Open MPI needs consent.
  launcher_flags=(--oversubscribe "${launcher_flags[@]}")
  [[ $(id -u) -ne 0 ]] || launcher_flags=(--allow-run-as-root "${launcher_flags[@]}")
fi
# Ranks share the machine's cores: one intra-op thread each unless told otherwise.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo "mpirun.sh: $np rank(s): $program ${args[*]}"
# Open MPI's mpirun forwards SIGUSR1 to the ranks but kills them on SIGINT and
# SIGTERM, so every stop request is passed on as SIGUSR1. setsid keeps the
# terminal's Ctrl-C away from the ranks: this script alone decides what they get.
setsid "$launcher" -n "$np" "${launcher_flags[@]}" "$program" "${args[@]}" &
job=$!
forwarded=
forward() { forwarded="SIG$1, passed on as SIGUSR1"; kill -s USR1 "$job" 2>/dev/null || true; }
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward USR1' USR1
while :; do
  rc=0
  wait "$job" || rc=$?
  if ((rc > 128)) && kill -0 "$job" 2>/dev/null; then continue; fi
  break
done
trap - INT TERM USR1

if ((rc == 75)); then
  echo "mpirun.sh: training stopped after a checkpoint (${forwarded:-signal sent to the ranks});" \
       "run the same command again to continue"
fi
exit "$rc"
