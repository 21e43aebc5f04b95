#!/bin/sh
# Open MPI's remote-launch agent for emulated nodes (mpirun --mca plm_rsh_agent THIS): called like ssh,
# 'rsh-agent.sh HOST COMMAND...', it runs COMMAND through a shell inside HOST's namespaces
# (tests/multinode/nodes.sh writes each node's holder pid to $MULTINODE_DIR/HOST.pid).
: "${MULTINODE_DIR:?rsh-agent.sh: MULTINODE_DIR is not set (tests/multinode/nodes.sh sets it)}"
host=$1
shift
pid=$(cat "$MULTINODE_DIR/$host.pid" 2>/dev/null) || { echo "rsh-agent.sh: no emulated node '$host'" >&2; exit 255; }
# ssh's exit status for a host it cannot reach: 255.
exec nsenter -t "$pid" --net --uts --mount --wd=/ -- /bin/sh -c "$*" || exit 255
