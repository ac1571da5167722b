#!/usr/bin/env bash
# Stop the Slurm started by slurm_up.sh <state-dir>.
#
# usage: slurm_down.sh <state-dir>
#
# Stops slurmd and slurmctld by their pid files in <state-dir> and waits for
# them to exit. munged is left running on purpose (harmless, maybe shared);
# no package is ever removed (Open MPI depends on libmunge).
# Safe to run when nothing is running.
set -euo pipefail

log() { echo "slurm_down: $*" >&2; }

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 <state-dir>" >&2; exit 2; }
STATE=$(realpath -m -- "$1")
CONF=$STATE/slurm.conf

pid_of() { # <daemon>: its pid if the pid file names a live process of that name
    local f=$STATE/$1.pid pid
    [[ -s $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    # Guard against a stale pid file whose pid was reused by something else.
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]] || return 1
    echo "$pid"
}

running() { # <pid>: exists and is not a zombie (our init may not reap orphans)
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && ${st:0:1} != Z ]]
}

# Cancel leftover jobs first so their slurmstepd/tasks do not outlive slurmd.
if pid_of slurmctld >/dev/null && [[ -f $CONF ]]; then
    SLURM_CONF=$CONF timeout 10 scancel --full --quiet --partition=debug 2>/dev/null || true
    for _ in $(seq 20); do
        [[ -z $(SLURM_CONF=$CONF timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
        sleep 0.5
    done
fi

rc=0
# slurmd first, so it does not keep retrying a vanished controller.
for d in slurmd slurmctld; do
    pid=$(pid_of "$d") || { log "$d not running"; continue; }
    log "stopping $d (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do # up to 20 s
        running "$pid" || break
        sleep 0.2
    done
    if running "$pid"; then
        log "$d ignored SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    if running "$pid"; then
        log "ERROR: $d (pid $pid) is still running"
        rc=1
    else
        rm -f "$STATE/$d.pid"
    fi
done
exit "$rc"
