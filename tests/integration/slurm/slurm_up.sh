#!/usr/bin/env bash
# Start a throw-away single-node Slurm (slurmctld + slurmd, Debian 22.05
# packages) on localhost for the integration tests.
#
# usage: slurm_up.sh <state-dir>
#
# Everything Slurm writes (config, spool, state, logs, pid files) lives in
# <state-dir>; munged is the only system-wide daemon and is left running by
# slurm_down.sh (harmless, and other things may use it).
# All progress goes to stderr; the last (and only) stdout line is
#   export SLURM_CONF=<state-dir>/slurm.conf
# so callers can: eval "$(slurm_up.sh DIR | tail -n 1)"
#
# Exit codes: 0 up and node idle; 77 Slurm cannot run here (skip);
# other non-zero: real error (message + log tail on stderr).
#
# Ports default to 16817/16818 (not Slurm's 6817/6818, to avoid clashing
# with a real installation); override with SLURM_TEST_CTLD_PORT /
# SLURM_TEST_SLURMD_PORT when running several instances at once.
set -euo pipefail

log() { echo "slurm_up: $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }
die() { log "ERROR: $*"; exit 1; }

[[ $# -eq 1 && -n $1 ]] || { echo "usage: $0 <state-dir>" >&2; exit 2; }

PKGS=(slurmctld slurmd slurm-client munge libpmix-dev)
APT_CMD=(apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${PKGS[@]}")

# --- packages -------------------------------------------------------------
missing=()
for p in "${PKGS[@]}"; do
    grep -q '^install ok installed$' <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" \
        || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        log "missing packages: ${missing[*]}; install them as root with:"
        echo "${APT_CMD[*]}" >&2
        exit 77
    fi
    log "installing ${missing[*]}"
    # DEBIAN_FRONTEND: never prompt; the lock timeout lets a concurrent apt finish.
    if ! DEBIAN_FRONTEND=noninteractive "${APT_CMD[@]}" >&2; then
        # retry once after refreshing stale package lists (fresh machines)
        apt-get -o DPkg::Lock::Timeout=900 update >&2 || true
        DEBIAN_FRONTEND=noninteractive "${APT_CMD[@]}" >&2 \
            || skip "cannot install ${missing[*]} (apt-get failed)"
    fi
fi

# slurmd must be root to launch tasks as the submitting user and munged must
# be started as the munge user, which needs root too.
[[ $(id -u) -eq 0 ]] || skip "a local slurmd needs root"

# --- munge ----------------------------------------------------------------
getent passwd munge >/dev/null || skip "no munge user (munge package broken?)"
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating munge key"
    install -d -o munge -g munge -m 700 /etc/munge
    if [[ -x /usr/sbin/mungekey ]]; then
        /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
fi
# munged refuses keys readable by others or owned by someone else.
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key

if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    if ! pgrep -x munged >/dev/null; then
        log "starting munged"
        # Without systemd nobody creates the runtime dirs munged expects.
        install -d -o munge -g munge -m 755 /run/munge
        install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
        # munged refuses to run as root; it daemonises itself.
        setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged \
            || skip "munged failed to start (see /var/log/munge/munged.log)"
    fi
    for _ in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.2
    done
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 \
        || skip "munge credentials do not work (munged not answering)"
fi

# --- state dir and config -------------------------------------------------
STATE=$(realpath -m -- "$1")
CONF=$STATE/slurm.conf
NODE=$(hostname -s)
CTLD_PORT=${SLURM_TEST_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_TEST_SLURMD_PORT:-16818}

alive() { # <pidfile> <comm>: is the daemon of that pid file still running?
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]] \
        && [[ $(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) != Z* ]] # not a zombie
}
for d in slurmctld slurmd; do
    alive "$STATE/$d.pid" "$d" \
        && die "$d from $STATE is still running; run slurm_down.sh $STATE first"
done
for port in "$CTLD_PORT" "$SLURMD_PORT"; do
    # bash's /dev/tcp connects only if something is listening already.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is in use (set SLURM_TEST_CTLD_PORT/SLURM_TEST_SLURMD_PORT)"
    fi
done

# Fresh controller state and spool each time: no stale jobs or node states.
mkdir -p "$STATE"
rm -rf "$STATE/ctld-state" "$STATE/slurmd-spool"
mkdir -p "$STATE/ctld-state" "$STATE/slurmd-spool"
rm -f "$STATE"/slurmctld.log "$STATE"/slurmd.log "$STATE"/*.pid

cat >"$CONF" <<EOF
# Generated by slurm_up.sh: single-node test cluster, everything in this dir.
ClusterName=accelhpc-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
# linuxproc/none: no cgroup support needed inside containers.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Trust CPUs= below rather than the hardware: lets srun -n 4 run on 2 cores.
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
StateSaveLocation=$STATE/ctld-state
SlurmdSpoolDir=$STATE/slurmd-spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Short timeouts so a broken setup fails fast.
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=5
# A requeued job may start again once the credentials of its last run have
# expired: BeginTime = requeue time + cred_expire + 1 (Slurm's default 120 s).
# The test jobs need a few seconds to launch their steps, not two minutes.
AuthInfo=cred_expire=10
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

export SLURM_CONF=$CONF

fail_logs() { # print daemon log tails, then exit 1 with the reason
    for f in "$STATE/slurmctld.log" "$STATE/slurmd.log"; do
        [[ -f $f ]] && { log "--- tail $f"; tail -n 20 "$f" >&2; }
    done
    die "$*"
}

# --- daemons --------------------------------------------------------------
# Both daemonise and write their pid files; -i ignores unreadable old state.
log "starting slurmctld (port $CTLD_PORT)"
/usr/sbin/slurmctld -i -f "$CONF" || fail_logs "slurmctld failed to start"
log "starting slurmd (port $SLURMD_PORT)"
/usr/sbin/slurmd -f "$CONF" || fail_logs "slurmd failed to start"

# ~7 s is typical; poll up to 30 s for the node to register as idle.
state=
for _ in $(seq 60); do
    state=$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null || true)
    [[ $state == idle ]] && break
    sleep 0.5
done
[[ $state == idle ]] || fail_logs "node $NODE not idle after 30 s (state: '${state:-no answer}')"

log "Slurm is up: node $NODE idle, SLURM_CONF=$CONF"
echo "export SLURM_CONF=$CONF"
