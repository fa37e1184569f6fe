#!/bin/bash
# Stop what tests/realsite/start.sh started: every Slurm job (the annexes' pilots), the ssh control
# masters `htcondor annex create` left, the access point's pool, Slurm, sshd and munge; remove what it
# made outside its state directory. Then say whatever is left.   sudo tests/realsite/stop.sh
set -uo pipefail
STATE=${REALSITE_DIR:-${TMPDIR:-/tmp}/realsite}
RUN_AS=${REALSITE_USER:-htcuser}
P=$STATE
[ "$(id -u)" = 0 ] || { echo "realsite: run me as root (as start.sh)" >&2; exit 1; }
[ -d "$P" ] || { echo "realsite: nothing at $P"; exit 0; }
export SLURM_CONF=$P/slurm/slurm.conf
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {  # SIGNAL PIDFILE: signal the daemon and wait up to 30 s for it to exit
    local pid
    alive "$2" || return 0
    pid=$(cat "$2"); kill "-$1" "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
    echo "realsite: $2's process $pid outlived 30 s; killing it" >&2; kill -KILL "$pid"
}

if alive "$P/slurm/slurmctld.pid"; then
    jobs=$(squeue -h -o %i 2>/dev/null)
    if [ -n "$jobs" ]; then
        echo "realsite: cancelling Slurm jobs $(echo $jobs)"; scancel $jobs
        for _ in $(seq 1 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
    fi
fi
for socket in "$P"/ctl/master-*; do
    [ -S "$socket" ] && runuser -u "$RUN_AS" -- ssh -o ControlPath="$socket" -O exit localhost 2>/dev/null
done
stop_pidfile QUIT "$P/pool/local/run/master.pid"  # fast shutdown of the pool's daemons and jobs
stop_pidfile TERM "$P/slurm/slurmd.pid"
stop_pidfile TERM "$P/slurm/slurmctld.pid"
stop_pidfile TERM "$P/ssh/sshd.pid"
stop_pidfile TERM "$P/munge/run/munged.pid"

# What start.sh made outside $P, newest first; the known_hosts line it added.
if [ -s "$P/ssh/known_hosts.line" ]; then
    home=$(getent passwd "$RUN_AS" | cut -d: -f6)
    grep -vxF -f "$P/ssh/known_hosts.line" "$home/.ssh/known_hosts" > "$home/.ssh/known_hosts.tmp" 2>/dev/null
    mv "$home/.ssh/known_hosts.tmp" "$home/.ssh/known_hosts" 2>/dev/null
    rm -f "$P/ssh/known_hosts.line"
fi
# (A directory it made, the user's ~/.ssh, holds only what it made.)
[ -s "$P/made" ] && tac "$P/made" | while read -r path; do rm -rf "$path"; done
: > "$P/made"

# Processes of this harness: the user's whose command line or environment names the state directory
# (pool daemons, pilots, ssh masters; another pool of the same user is not this harness's), and Slurm's.
left=$(for pid in $(pgrep -u "$RUN_AS"); do
           grep -qsaF "$P" "/proc/$pid/cmdline" "/proc/$pid/environ" && ps -o pid=,args= -p "$pid"
       done; pgrep -a -x slurmctld; pgrep -a -x slurmd)
if [ -n "$left" ]; then echo "realsite: still running:"; echo "$left"; exit 1; fi
echo "realsite: stopped; nothing left running (state kept in $P)"
