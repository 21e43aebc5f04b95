# shellcheck shell=bash disable=SC2154
# Sourced (bash) by tests/slurm/slurm-ddp.sh and .ci/install-check: starts a private one-node Slurm cluster on
# 127.0.0.1 (its own munged, slurmctld and slurmd, config, ports, state and spool in $tmp, a fake 2-GPU
# gres), stopped and removed on exit. Needs root and $srcdir (for slurm/select-port), skip and hard (exit
# 77 and 99 with a message). Leaves SLURM_CONF exported, the node's name in $node, and $tmp/jobs empty.
[ "$(id -u)" = 0 ] || skip "slurmd must run as root"

pkgs=(munge slurmctld slurmd slurm-client libpmix-dev)
missing=()
for p in "${pkgs[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get > /dev/null || skip "needs ${missing[*]} and there is no apt-get"
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$(mktemp) || hard "mktemp failed"
    timeout 900 apt-get install -y -q "${missing[@]}" > "$apt_log" 2>&1 ||
        { timeout 300 apt-get update -q && timeout 900 apt-get install -y -q "${missing[@]}"; } >> "$apt_log" 2>&1 ||
        { tail -n 5 "$apt_log"; rm -f "$apt_log"; skip "cannot install ${missing[*]} with apt-get"; }
    rm -f "$apt_log"
fi

# Nothing from a surrounding Slurm job or the user's defaults may leak into this cluster's jobs.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC)_|^MASTER_(ADDR|PORT)$|^MNIST_DDP_')
# One node: ranks talk through shared memory only, never a network interface.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

tmp=$(mktemp -d /tmp/slurm-ddp.XXXXXX) || hard "mktemp failed"
# munged insists that every directory above its socket is searchable by all.
chmod 755 "$tmp"
mkdir -p "$tmp"/{munge,state,spool,log,dev,jobs}
munged_pid='' ctld_pid='' slurmd_pid=''

# stop PID: SIGTERM, then SIGKILL after 15 s.
stop() {
    [ -n "$1" ] && kill -0 "$1" 2> /dev/null || return 0
    kill "$1"
    for _ in $(seq 150); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$1" 2> /dev/null
    wait "$1" 2> /dev/null
}
cleanup() {
    if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2> /dev/null; then
        # Jobs first, so that no slurmstepd or rank outlives the daemons.
        squeue -h -o %A 2> /dev/null | xargs -r scancel 2> /dev/null
        for _ in $(seq 60); do [ -z "$(squeue -h 2> /dev/null)" ] && break; sleep 0.5; done
    fi
    stop "$slurmd_pid"
    stop "$ctld_pid"
    stop "$munged_pid"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 99' INT TERM HUP

daemon_logs() {
    for f in "$tmp"/log/*; do echo "---- $f (last 15 lines)"; tail -n 15 "$f"; done
}

# --- The cluster ----------------------------------------------------------------------------
node=$(hostname -s)
# Two distinct free ports outside the ephemeral range: select-port with this shell's PID as "job".
if ! ctld_port=$(SLURM_JOB_ID=$$ MNIST_DDP_PORT_MIN=16000 MNIST_DDP_PORT_MAX=16999 "$srcdir/slurm/select-port") ||
    ! slurmd_port=$(SLURM_JOB_ID=$(($$ + 1)) MNIST_DDP_PORT_MIN=16000 MNIST_DDP_PORT_MAX=16999 "$srcdir/slurm/select-port"); then
    hard "no free ports for slurmctld and slurmd"
fi

# Fake GPUs: character devices with /dev/null's numbers (Slurm only needs the files to exist).
read -r major minor < <(stat -c '%t %T' /dev/null)
for i in 0 1; do
    mknod "$tmp/dev/nvidia$i" c $((16#$major)) $((16#$minor)) || hard "mknod failed"
done

cat > "$tmp/slurm.conf" << EOF
ClusterName=mnistddptest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again only cred_expire seconds later (default 120), and then at the next periodic
# scheduling pass (sched_interval, default 60 s).
AuthInfo=socket=$tmp/munge/munge.socket,cred_expire=10
SchedulerParameters=sched_interval=2
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
TmpFS=$tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
KillWait=5
# sbatch --wait polls every 2 s only while that is under MinJobAge/2 (else up to every 32 s).
MinJobAge=4
MailProg=/bin/true
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=8000 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=60 State=UP
EOF
cat > "$tmp/gres.conf" << EOF
AutoDetect=off
Name=gpu File=$tmp/dev/nvidia0
Name=gpu File=$tmp/dev/nvidia1
EOF
export SLURM_CONF=$tmp/slurm.conf

dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
munged -F --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/log/munged.log" \
    > "$tmp/log/munged.out" 2>&1 &
munged_pid=$!
for _ in $(seq 100); do [ -S "$tmp/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$tmp/munge/munge.socket" ] || { daemon_logs; hard "munged did not start"; }

slurmctld -D -i -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -f "$SLURM_CONF" -N "$node" > "$tmp/log/slurmd.out" 2>&1 &
slurmd_pid=$!
state=
for _ in $(seq 120); do
    state=$(sinfo -h -n "$node" -o %t 2> /dev/null)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || { daemon_logs; hard "node $node not idle after 60 s (state '$state')"; }
echo "cluster up: node $node, slurmctld on 127.0.0.1:$ctld_port, slurmd on 127.0.0.1:$slurmd_port"
srun --mpi=list 2>&1 | grep -q pmix || hard "Slurm has no mpi/pmix plugin (srun --mpi=list)"
