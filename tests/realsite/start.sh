#!/bin/bash
# The realsite harness: a real HTCondor access point and two NAIRR "systems" on this machine, so that
# `htcondor annex create QUEUE@SYSTEM` (HTCondor's ssh + sbatch path) creates real annexes.
#
#   sudo env PATH="/path/to/htcondor/bin:/path/to/htcondor/sbin:$PATH" tests/realsite/start.sh
#
# - Slurm (slurmctld + slurmd, munge) on loopback with two partitions named after two systems'
#   queues in HTCondor's annex SYSTEM_TABLE: `shared` (Expanse) and `cpu` (Delta); one node.
# - sshd on 127.0.0.1:22, the systems' login host, for $REALSITE_USER only (key login).
# - The access point: a personal pool (collector 127.0.0.1:$REALSITE_PORT, negotiator, schedd) run by
#   $REALSITE_USER, configured as condor_config.in says (each annex knob with the error without it).
# - HTCondor's own annex scripts: a copy of the installed libexec/ in which only the pilot's download
#   URL (WELL_KNOWN_LOCATION_FOR_BINARIES) is changed, to a file:// tarball of the installed HTCondor.
# Everything comes from Debian's packages (slurm-wlm, munge, openssh-server) and the HTCondor found on
# PATH (condor_master); nothing is built. State: $REALSITE_DIR (default $TMPDIR/realsite), plus the user's
# ~/.ssh key and known_hosts and /usr/local/bin/python where they were missing (stop.sh removes what
# this made). Afterwards: `$REALSITE_DIR/as-user CMD...` runs CMD as the submitter, with the pool's
# CONDOR_CONFIG and a PATH that has `htcondor`, htcannex and snakemake.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${REALSITE_DIR:-${TMPDIR:-/tmp}/realsite}
RUN_AS=${REALSITE_USER:-htcuser}
PORT=${REALSITE_PORT:-9718}

die() { echo "realsite: $*" >&2; exit 1; }
on_path() { command -v "$1" || die "$1 is not on PATH: $2"; }
[ "$(id -u)" = 0 ] || die "run me as root: I start slurmctld, slurmd, munged and sshd, and run the pool as $RUN_AS"
id "$RUN_AS" >/dev/null 2>&1 || die "no user $RUN_AS: create it (useradd -m -s /bin/bash $RUN_AS) or set REALSITE_USER"
MASTER=$(on_path condor_master "put the sbin/ of an installed HTCondor 25 on PATH")
RELEASE=$(dirname "$(dirname "$(readlink -f "$MASTER")")")
SLURMCTLD=$(on_path slurmctld "apt-get install slurm-wlm")
SLURMD=$(on_path slurmd "apt-get install slurm-wlm")
MUNGED=$(on_path munged "apt-get install munge")
SSHD=$(on_path sshd "apt-get install openssh-server")
on_path ssh-keygen "apt-get install openssh-client" >/dev/null
[ -r /etc/munge/munge.key ] || die "/etc/munge/munge.key is missing (apt-get install munge makes it)"
USER_HOME=$(getent passwd "$RUN_AS" | cut -d: -f6)
USER_ID=$(id -u "$RUN_AS"); GROUP_ID=$(id -g "$RUN_AS")
as_user() { runuser -u "$RUN_AS" -- env HOME="$USER_HOME" "$@"; }
made() { echo "$1" >> "$STATE/made"; }   # what stop.sh removes outside $STATE

P=$STATE
mkdir -p "$P"/{pool,dist,ssh,munge/etc,munge/run,slurm/state,slurm/spool,slurm/log,scratch,remotehome,ctl,usertokens.d,bin}
touch "$P/made"
chown "$RUN_AS:" "$P/pool" "$P/ctl" "$P/usertokens.d" "$P/scratch" "$P/remotehome"
chmod 700 "$P/usertokens.d"

# ---- the submitter's Python: htcannex of this checkout, runnable by the user ----
PY=${REALSITE_PYTHON:-$P/venv/bin/python}
# A venv made for another checkout (moved or deleted since) is installed again from this one (-P: the
# working directory, which may be a checkout, is not on the path of this check).
IMPORTED=$(as_user "$PY" -P -c "import htcondor_cli, snakemake_executor_plugin_htcannex as h; print(h.__file__)" 2>/dev/null || true)
if [ "$(dirname "$IMPORTED" 2>/dev/null)" != "$REPO/snakemake_executor_plugin_htcannex" ]; then
    [ -n "${REALSITE_PYTHON:-}" ] && die "REALSITE_PYTHON=$PY cannot import the htcannex of $REPO as $RUN_AS"
    echo "realsite: making $P/venv (htcannex of $REPO with its train extra; minutes, once per checkout)"
    [ -x "$P/venv/bin/pip" ] || /usr/bin/python3 -m venv "$P/venv"
    "$P/venv/bin/pip" install -q -e "$REPO[train,test]"
    chmod -R a+rX "$P/venv"
fi
SITE_PACKAGES=$(as_user "$PY" -c "import htcondor2, os; print(os.path.dirname(os.path.dirname(htcondor2.__file__)))")
# `htcondor` as HTCondor installs it, run by that Python (it has the htcondor2 bindings).
cat > "$P/bin/htcondor" <<EOF
#!/bin/sh
exec "$PY" -c 'import sys; from htcondor_cli.cli import main; sys.argv[0] = "htcondor"; sys.exit(main())' "\$@"
EOF
chmod 755 "$P/bin/htcondor"
# Jobs run `python` from the execute point's PATH (/usr/local/bin:/usr/bin:/bin), as at a site.
if [ ! -e /usr/local/bin/python ]; then
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" > /usr/local/bin/python
    chmod 755 /usr/local/bin/python
    made /usr/local/bin/python
fi

# ---- HTCondor's annex scripts, with the pilot's download URL pointing at the installed HTCondor ----
VERSION=$("$RELEASE/bin/condor_version" | awk '/CondorVersion/{print $2; exit}')
NAME=condor-$VERSION-realsite
TARBALL=$P/dist/$NAME.tar.gz
rm -rf "$P/libexec"; cp -a "$RELEASE/libexec" "$P/libexec"
for script in $(grep -l '^WELL_KNOWN_LOCATION_FOR_BINARIES=' "$P/libexec/annex/"*); do
    sed -i "s|^WELL_KNOWN_LOCATION_FOR_BINARIES=.*|WELL_KNOWN_LOCATION_FOR_BINARIES=file://$TARBALL|" "$script"
done
if [ ! -s "$TARBALL" ] || [ "$MASTER" -nt "$TARBALL" ] || [ "$HERE/pilot-node.config" -nt "$TARBALL" ]; then
    echo "realsite: packing $RELEASE as $TARBALL"
    extra=$P/dist/extra/etc/condor/config.d
    mkdir -p "$extra"; cp "$HERE/pilot-node.config" "$extra/50-realsite-node"
    base=$(basename "$RELEASE")
    # make-personal-from-tarball refuses a tarball with an etc/condor_config.
    tar -czf "$TARBALL.tmp" --exclude="$base/etc/condor_config" \
        --transform "s|^$base|$NAME|" --transform "s|^etc/|$NAME/etc/|" \
        -C "$(dirname "$RELEASE")" "$base" -C "$P/dist/extra" etc
    mv "$TARBALL.tmp" "$TARBALL"
fi

# ---- the access point's pool ----
sed -e "s|@RELEASE_DIR@|$RELEASE|g; s|@STATE@|$P|g; s|@PORT@|$PORT|g; s|@USER@|$RUN_AS|g; s|@UID@|$USER_ID|g; s|@GID@|$GROUP_ID|g" \
    "$HERE/condor_config.in" > "$P/pool/condor_config"
L=$P/pool/local
for d in "$L" "$L/log" "$L/spool" "$L/execute" "$L/lock" "$L/run" "$L/passwords.d" "$L/tokens.d"; do as_user mkdir -p "$d"; done
as_user chmod 700 "$L/passwords.d" "$L/tokens.d"
# The signing key of the pilots' tokens (ANNEX_TOKEN_KEY_NAME's default).
[ -s "$L/passwords.d/hpcannex-key" ] || as_user sh -c "head -c 64 /dev/urandom > '$L/passwords.d/hpcannex-key' && chmod 600 '$L/passwords.d/hpcannex-key'"
chmod -R a+rX "$P/libexec" "$P/dist" "$P/bin"
chmod a+rx "$P"

# ---- munge, with its own socket ----
M=$P/munge
cp /etc/munge/munge.key "$M/etc/"; chown -R munge: "$M"; chmod 755 "$M" "$M/run"; chmod 700 "$M/etc"; chmod 600 "$M/etc/munge.key"
if ! { [ -s "$M/run/munged.pid" ] && kill -0 "$(cat "$M/run/munged.pid")" 2>/dev/null; }; then
    runuser -u munge -- "$MUNGED" --key-file="$M/etc/munge.key" --socket="$M/run/munge.socket.2" \
        --pid-file="$M/run/munged.pid" --log-file="$M/munged.log" --seed-file="$M/etc/munged.seed"
fi

# ---- Slurm: one node, a partition per system's queue ----
S=$P/slurm
cat > "$S/slurm.conf" <<EOF
ClusterName=realsite
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$M/run/munge.socket.2
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
# Two annexes (two Slurm jobs) share the node: cores and memory are consumable.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=1000
MpiDefault=none
ReturnToService=2
KillWait=10
PlugStackConfig=$S/plugstack.conf
# Delta's pilot asks for --constraint="scratch" (delta.fragment).
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=${REALSITE_NODE_MEMORY_MB:-12000} Features=scratch State=UNKNOWN
PartitionName=shared Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=localhost MaxTime=INFINITE State=UP
EOF
: > "$S/plugstack.conf"; chmod -R a+rX "$S"
export SLURM_CONF=$S/slurm.conf
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
running "$S/slurmctld.pid" || "$SLURMCTLD" -f "$SLURM_CONF"
running "$S/slurmd.pid" || "$SLURMD" -f "$SLURM_CONF" -N localhost

# ---- sshd on 127.0.0.1:22: the systems' login host ----
[ -s "$P/ssh/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$P/ssh/ssh_host_ed25519_key"
if [ ! -d "$USER_HOME/.ssh" ]; then install -d -o "$RUN_AS" -g "$GROUP_ID" -m 700 "$USER_HOME/.ssh"; made "$USER_HOME/.ssh"; fi
if [ ! -s "$USER_HOME/.ssh/id_ed25519" ]; then
    as_user ssh-keygen -q -t ed25519 -N '' -f "$USER_HOME/.ssh/id_ed25519"
    made "$USER_HOME/.ssh/id_ed25519"; made "$USER_HOME/.ssh/id_ed25519.pub"
fi
KNOWN="localhost $(cut -d' ' -f1,2 "$P/ssh/ssh_host_ed25519_key.pub")"
if ! grep -qxF "$KNOWN" "$USER_HOME/.ssh/known_hosts" 2>/dev/null; then
    echo "$KNOWN" >> "$USER_HOME/.ssh/known_hosts"; chown "$RUN_AS:" "$USER_HOME/.ssh/known_hosts"
    echo "$KNOWN" > "$P/ssh/known_hosts.line"
fi
# The login's environment: SCRATCH (expanse.fragment falls back to Lustre paths otherwise), a HOME
# under the state directory (`annex create` makes ~/.hpc-annex/scratch there) and Slurm's config.
echo "environment=\"SCRATCH=$P/scratch\",environment=\"HOME=$P/remotehome\",environment=\"SLURM_CONF=$SLURM_CONF\",environment=\"PATH=/usr/local/bin:/usr/bin:/bin\" $(cat "$USER_HOME/.ssh/id_ed25519.pub")" \
    > "$P/ssh/authorized_keys.$RUN_AS"
chown "$RUN_AS:" "$P/ssh/authorized_keys.$RUN_AS"; chmod 600 "$P/ssh/authorized_keys.$RUN_AS"
cat > "$P/ssh/sshd_config" <<EOF
Port 22
ListenAddress 127.0.0.1
HostKey $P/ssh/ssh_host_ed25519_key
PidFile $P/ssh/sshd.pid
AuthorizedKeysFile $P/ssh/authorized_keys.%u
StrictModes no
PermitUserEnvironment yes
PasswordAuthentication no
KbdInteractiveAuthentication ${REALSITE_KBD_INTERACTIVE:-no}
# A user whose password is locked ("!" in shadow) is refused without PAM's account check.
UsePAM yes
PermitRootLogin no
AllowUsers $RUN_AS
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
mkdir -p /run/sshd
running "$P/ssh/sshd.pid" || "$SSHD" -f "$P/ssh/sshd_config" -E "$P/ssh/sshd.log"

# ---- the submitter's command line ----
cat > "$P/as-user" <<EOF
#!/bin/sh
# Run a command as $RUN_AS, the submitter, against the realsite access point.
exec runuser -u $RUN_AS -- env -i HOME="$USER_HOME" USER=$RUN_AS LOGNAME=$RUN_AS LANG=C.UTF-8 \\
    PATH="$P/bin:$(dirname "$PY"):$RELEASE/bin:$RELEASE/sbin:/usr/local/bin:/usr/bin:/bin" \\
    CONDOR_CONFIG="$P/pool/condor_config" SLURM_CONF="$SLURM_CONF" PYTHONPATH="$SITE_PACKAGES" \\
    "\$@"
EOF
chmod 755 "$P/as-user"

# ---- the pool ----
if ! running "$L/run/master.pid"; then
    as_user env CONDOR_CONFIG="$P/pool/condor_config" "$MASTER" -pidfile "$L/run/master.pid"
fi
for _ in $(seq 1 60); do
    "$P/as-user" condor_status -schedd -af Name 2>/dev/null | grep -q . && break
    sleep 1
done
"$P/as-user" condor_status -schedd -af Name | grep -q . || die "the pool's schedd did not come up: see $L/log/"
for _ in $(seq 1 30); do
    sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
    sleep 1
done
"$P/as-user" ssh -o BatchMode=yes localhost 'sinfo -h -o "%P %a %D %T"' \
    || die "ssh to localhost as $RUN_AS, or Slurm there, does not answer: see $P/ssh/sshd.log, $S/log/"
echo "realsite: up. Access point $("$P/as-user" condor_status -schedd -af Name) at 127.0.0.1:$PORT; systems expanse (queue shared) and delta (queue cpu) on localhost"
echo "realsite: run commands as the submitter with $P/as-user CMD..."
