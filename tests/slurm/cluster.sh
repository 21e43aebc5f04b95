# shellcheck shell=bash disable=SC2154,SC2034 # $tmp, $srcdir, skip and hard come from the caller; munged_pid, bin, data go back to it
# A private Slurm cluster for tests, sourced by bash scripts that define skip() and hard() and set $tmp (a
# directory of their own, removed by them; slurm_one_node makes it): tests/slurm/slurm-ddp.sh and
# .ci/install-check (one node on 127.0.0.1) and tests/multinode/slurm-nodes.sh (emulated nodes). Every path, port and key is under $tmp; %n in a path is
# the node's name, so several slurmd share one configuration.
#   slurm_packages            install munge, Slurm and PMIx with apt-get when missing (skip if impossible)
#   slurm_munged              start a munged on $tmp/munge/munge.socket (sets munged_pid)
#   slurm_fake_gpus N         N stand-in GPU device files and $tmp/gres.conf for them
#   slurm_conf TMPFS NODE...  the configuration lines common to both tests (the caller adds its hosts);
#                             TMPFS: the nodes' scratch (node-local where several nodes share a file system)
#   slurm_wait_idle NODE...   wait until every NODE is idle (hard error after 60 s)
#   slurm_stop PID            SIGTERM, then SIGKILL after 15 s
#   slurm_cancel_all          cancel every job and wait until the queue is empty
#   slurm_transitional STATE  whether a polled job state is a passing one, not worth recording
#   slurm_kill_strays         SIGKILL what is left of this cluster's jobs once its daemons are stopped
#   slurm_one_node [FIRST]    all of the above for one node on 127.0.0.1, with its cleanup; job IDs from FIRST
#                             (default 1): two clusters at once must not both run "job 2", whose Open MPI
#                             shared-memory segments would collide
#   slurm_template_test FIRST the templates' tests' start: slurm_one_node FIRST for the built binary and data,
#                             the checks' helpers (pass, fail, job_id, fingerprint), $tmp/jobs as the directory

slurm_packages() {
    local pkgs=(munge slurmctld slurmd slurm-client libpmix-dev) missing=() p apt_log
    for p in "${pkgs[@]}"; do
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    command -v apt-get > /dev/null || skip "needs ${missing[*]} and there is no apt-get"
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$(mktemp) || hard "mktemp failed"
    timeout 900 apt-get install -y -q "${missing[@]}" > "$apt_log" 2>&1 ||
        { timeout 300 apt-get update -q && timeout 900 apt-get install -y -q "${missing[@]}"; } >> "$apt_log" 2>&1 ||
        { tail -n 5 "$apt_log"; rm -f "$apt_log"; skip "cannot install ${missing[*]} with apt-get"; }
    rm -f "$apt_log"
}

slurm_munged() {
    # munged insists that every directory above its socket is searchable by all.
    chmod 755 "$tmp"
    mkdir -p "$tmp/munge" "$tmp/log"
    dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$tmp/munge/munge.key"
    munged -F --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
        --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/seed" --log-file="$tmp/log/munged.log" \
        > "$tmp/log/munged.out" 2>&1 &
    munged_pid=$!
    for _ in $(seq 100); do [ -S "$tmp/munge/munge.socket" ] && return 0; sleep 0.1; done
    hard "munged did not start: $(tail -n 3 "$tmp/log/munged.log" 2> /dev/null)"
}

# Fake GPUs: character devices with /dev/null's numbers (Slurm only needs the files to exist).
slurm_fake_gpus() {
    local major minor i
    mkdir -p "$tmp/dev"
    read -r major minor < <(stat -c '%t %T' /dev/null)
    echo "AutoDetect=off" > "$tmp/gres.conf"
    for ((i = 0; i < $1; i++)); do
        mknod "$tmp/dev/nvidia$i" c $((16#$major)) $((16#$minor)) || hard "mknod failed"
        echo "Name=gpu File=$tmp/dev/nvidia$i" >> "$tmp/gres.conf"
    done
}

slurm_conf() {
    local node
    mkdir -p "$tmp/state" "$tmp/log"
    for node in "${@:2}"; do mkdir -p "$tmp/spool/$node"; done
    cat << EOF
ClusterName=mnistddptest
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again only cred_expire seconds later (default 120), and then at the next periodic
# scheduling pass (sched_interval, default 60 s).
AuthInfo=socket=$tmp/munge/munge.socket,cred_expire=10
SchedulerParameters=sched_interval=2
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd-%n.log
TmpFS=$1
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
EOF
}

slurm_wait_idle() {
    local node state
    for node in "$@"; do
        state=
        for _ in $(seq 120); do
            state=$(sinfo -h -n "$node" -o %t 2> /dev/null)
            [ "$state" = idle ] && break
            sleep 0.5
        done
        [ "$state" = idle ] || { daemon_logs; hard "node $node not idle after 60 s (state '$state')"; }
    done
}

slurm_stop() {
    [ -n "$1" ] && kill -0 "$1" 2> /dev/null || return 0
    kill "$1"
    for _ in $(seq 150); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$1" 2> /dev/null
    wait "$1" 2> /dev/null
}

# Jobs first, so that no slurmstepd or rank outlives the daemons.
slurm_cancel_all() {
    squeue -h -o %A 2> /dev/null | xargs -r scancel 2> /dev/null
    for _ in $(seq 60); do [ -z "$(squeue -h 2> /dev/null)" ] && break; sleep 0.5; done
}

# COMPLETING, CONFIGURING and REQUEUED pass on their own; SIGNALING is Slurm delivering a signal (USR1, or
# --signal's harmless CONT, which may come up to 60 s early); '' is a poll between two records.
slurm_transitional() {
    case $1 in COMPLETING | CONFIGURING | REQUEUED | SIGNALING | '') return 0 ;; esac
    return 1
}

# A cancelled job's slurmstepd and ranks can outlive the queue's last record and the daemons, and would slow
# every later test: each process whose environment holds this cluster's SLURM_CONF (jobs inherit sbatch's)
# goes, never one of another cluster or a user's own job. Not this shell: it has SLURM_CONF too.
slurm_kill_strays() {
    local p d names=''
    [ -n "${SLURM_CONF:-}" ] || return 0
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        [ "$p" != $$ ] && [ "$p" != "$BASHPID" ] || continue
        grep -qzxF "SLURM_CONF=$SLURM_CONF" "$d/environ" 2> /dev/null || continue
        names="$names $(cat "$d/comm" 2> /dev/null)[$p]"
        kill -9 "$p" 2> /dev/null
    done
    [ -z "$names" ] || echo "cluster cleanup: killed what outlived the daemons:$names"
}

daemon_logs() {
    for f in "$tmp"/log/*; do echo "---- $f (last 15 lines)"; tail -n 15 "$f"; done
}

# core_backtraces DIR BINARY: every thread's stack in each core file in DIR (where a rank that crashed left
# one: the caller raised RLIMIT_CORE, which Slurm passes on to the job's tasks), so that a rare crash in CI
# comes with a backtrace, not only Open MPI's one-line handler output.
core_backtraces() {
    local c
    for c in "$1"/core "$1"/core.*; do
        [ -f "$c" ] || continue
        echo "---- $c: $(file -b "$c" 2> /dev/null | cut -c1-120)"
        if command -v gdb > /dev/null; then
            gdb -q -batch -ex 'thread apply all bt 30' "$2" "$c" 2>&1 | grep -v '^\[New LWP'
        else
            echo "(no gdb to read it: apt-get install gdb)"
        fi
    done
}

# slurm_one_node: a private one-node cluster on 127.0.0.1 (munged, slurmctld, slurmd, two stand-in GPUs),
# stopped and removed on exit (an EXIT trap named cleanup; a caller that adds its own calls it first).
# Leaves SLURM_CONF exported, the node's name in $node, $tmp (removed by cleanup) and $tmp/jobs empty.
slurm_one_node() {
    [ "$(id -u)" = 0 ] || skip "slurmd must run as root"
    slurm_packages
    # Nothing from a surrounding Slurm job or the user's defaults may leak into this cluster's jobs.
    while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC)_|^MASTER_(ADDR|PORT)$|^MNIST_DDP_')
    # One node: ranks talk through shared memory only, never a network interface.
    export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

    tmp=$(mktemp -d /tmp/slurm-ddp.XXXXXX) || hard "mktemp failed"
    mkdir -p "$tmp/jobs"
    munged_pid='' ctld_pid='' slurmd_pid=''
    cleanup() {
        if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2> /dev/null; then
            slurm_cancel_all
        fi
        slurm_stop "$slurmd_pid"
        slurm_stop "$ctld_pid"
        slurm_stop "$munged_pid"
        slurm_kill_strays
        rm -rf "$tmp"
    }
    trap cleanup EXIT
    trap 'exit 99' INT TERM HUP

    node=$(hostname -s)
    # Two distinct free ports outside the ephemeral range: select-port with this shell's PID as "job".
    if ! ctld_port=$(SLURM_JOB_ID=$$ MNIST_DDP_PORT_MIN=16000 MNIST_DDP_PORT_MAX=16999 "$srcdir/slurm/select-port") ||
        ! slurmd_port=$(SLURM_JOB_ID=$(($$ + 1)) MNIST_DDP_PORT_MIN=16000 MNIST_DDP_PORT_MAX=16999 "$srcdir/slurm/select-port"); then
        hard "no free ports for slurmctld and slurmd"
    fi

    slurm_fake_gpus 2
    {
        slurm_conf "$tmp" "$node"
        cat << EOF
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=8000 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=60 State=UP
FirstJobId=${1:-1}
EOF
    } > "$tmp/slurm.conf"
    export SLURM_CONF=$tmp/slurm.conf

    slurm_munged

    slurmctld -D -i -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
    ctld_pid=$!
    slurmd -D -f "$SLURM_CONF" -N "$node" > "$tmp/log/slurmd.out" 2>&1 &
    slurmd_pid=$!
    slurm_wait_idle "$node"
    echo "cluster up: node $node, slurmctld on 127.0.0.1:$ctld_port, slurmd on 127.0.0.1:$slurmd_port"
    srun --mpi=list 2>&1 | grep -q pmix || hard "Slurm has no mpi/pmix plugin (srun --mpi=list)"
}

# slurm_template_test FIRST: for slurm-ddp.sh and slurm-array.sh, which set $srcdir: $bin and $data from the
# build (a hard error without them), the one-node cluster with job IDs from FIRST, the templates' environment
# (jobs inherit sbatch's), the checks' counters and helpers, and $tmp/jobs as the working directory. (The
# helpers are defined here, not at the top: other callers have a fail of their own, tests/lib.sh's.)
slurm_template_test() {
    local builddir=${abs_top_builddir:-$srcdir}
    bin=${MNIST_DDP:-$builddir/src/mnist_ddp}
    data=${MNIST_DATA:-$builddir/data/mnist}
    [ -x "$bin" ] || hard "no mnist_ddp at $bin: build first (make)"
    [ -n "$(find "$data" -maxdepth 1 -name 'train-*.h5' -print -quit 2>/dev/null)" ] ||
        hard "no MNIST shards in $data: run 'make data'"
    slurm_one_node "$1"
    cd "$tmp/jobs" || hard "cd $tmp/jobs"
    export MNIST_DDP_ROOT=$srcdir MNIST_DDP=$bin MNIST_DATA=$data
    passes=0 failures=0
    pass() { echo "ok (${SECONDS}s): $*"; passes=$((passes + 1)); }
    # fail WHAT FILE...: the failure and the end of each file that tells why.
    fail() {
        echo "FAIL (${SECONDS}s): $1"
        shift
        for f in "$@"; do echo "---- $f (last 25 lines)"; tail -n 25 "$f" 2> /dev/null; done
        failures=$((failures + 1))
    }
    # The job ID that sbatch printed into FILE.
    job_id() { sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$1" 2> /dev/null; }
    # The parameter fingerprint of a --metrics file's summary line.
    fingerprint() { sed -n 's/.*"type":"summary".*"fingerprint":"\([0-9a-f]*\)".*/\1/p' "$1" 2> /dev/null; }
}
