# Emulated cluster nodes on one machine, sourced by the multinode tests after tests/lib.sh.
# A node is a holder process in its own network, UTS and mount namespaces: its own host name (nodeI), one
# interface eth0 with 10.211.0.I/24, and a private /etc/hosts (node names only), /dev/shm and
# $MULTINODE_DIR/local (node-local scratch, like a cluster node's /tmp); the rest of the file system is
# shared, as on a cluster. The links end in a bridge inside a switch namespace of its own, so no
# interface, address or route of this machine's namespace is touched, and traffic can only go to the nodes. Every process inside a node shares the holder's network namespace: that is how node_kill
# finds them all. nodes_down (on every exit) kills every node's processes, then the switch.
#   nodes_up N             create node1..nodeN (exit 77 with the reason where namespaces are not allowed)
#   node_add I             (re)create node I, e.g. after node_kill
#   node_run NAME CMD...   run CMD inside NAME's namespaces, in the current directory
#   node_kill NAME         SIGKILL every process of NAME (a lost node); returns when none is left
#   node_left NAMES        how many processes of these names run on the nodes
# tests/multinode/rsh-agent.sh reads $MULTINODE_DIR/NAME.pid to launch Open MPI's daemons the same way.

MULTINODE_DIR=$TMP/nodes
MULTINODE_NET=10.211.0
export MULTINODE_DIR
mkdir -p "$MULTINODE_DIR/local"
multinode_switch=

# holder READY CMD UNSHARE-OPTION...: a process in new namespaces that runs CMD, touches READY, then lives
# as long as this test shell (so that even a killed test leaves no idle namespace behind). Sets
# multinode_pid. unshare makes the mounts of a new mount namespace private: nothing leaks out.
multinode_holder() {
  ready=$1 cmd=$2
  shift 2
  # shellcheck disable=SC2016 # expanded by the holder shell
  unshare "$@" sh -c "$cmd"' && : > "$1" && while kill -0 "$2" 2>/dev/null; do sleep 1; done' \
    holder "$ready" "$$" >"$MULTINODE_DIR/holder.log" 2>&1 &
  multinode_pid=$!
  tries=0
  while [ ! -e "$ready" ]; do
    kill -0 "$multinode_pid" 2>/dev/null || return 1
    tries=$((tries + 1))
    [ "$tries" -le 100 ] || return 1
    sleep 0.1
  done
}

nodes_up() {
  [ "$(id -u)" = 0 ] || skip "emulated nodes need root (network, UTS and mount namespaces)"
  for t in unshare nsenter ip; do
    command -v "$t" >/dev/null || fail "emulated nodes need $t (util-linux, iproute2)"
  done
  unshare --net --uts --mount true 2>"$MULTINODE_DIR/probe.err" ||
    skip "cannot create namespaces here: $(head -n 1 "$MULTINODE_DIR/probe.err")"
  { echo "127.0.0.1 localhost"; for n in $(seq "$1"); do echo "$MULTINODE_NET.$n node$n"; done; } >"$MULTINODE_DIR/hosts"
  multinode_holder "$MULTINODE_DIR/switch.ready" \
    'ip link set lo up && ip link add br0 type bridge && ip link set br0 up' --net ||
    fail "cannot start the switch namespace: $(cat "$MULTINODE_DIR/holder.log")"
  multinode_switch=$multinode_pid
  for n in $(seq "$1"); do node_add "$n"; done
}

# The host name and mounts are changed only after checking that the holder has UTS and mount namespaces
# of its own: never this machine's.
node_add() {
  name=node$1
  rm -f "$MULTINODE_DIR/$name.ready"
  multinode_holder "$MULTINODE_DIR/$name.ready" \
    "[ \"\$(readlink /proc/self/ns/uts)\" != '$(readlink /proc/self/ns/uts)' ] &&
    [ \"\$(readlink /proc/self/ns/mnt)\" != '$(readlink /proc/self/ns/mnt)' ] && hostname $name &&
    mount --bind '$MULTINODE_DIR/hosts' /etc/hosts && mount -t tmpfs -o size=256m shm /dev/shm &&
    mount -t tmpfs -o size=256m local '$MULTINODE_DIR/local'" \
    --net --uts --mount ||
    fail "cannot start $name: $(cat "$MULTINODE_DIR/holder.log")"
  echo "$multinode_pid" >"$MULTINODE_DIR/$name.pid"
  # A replaced node's old link may outlive its namespace for a moment: deleted first.
  nsenter -t "$multinode_switch" --net sh -e -c "
    ip link del p$1 2>/dev/null || true
    ip link add p$1 type veth peer name eth0 netns $multinode_pid
    ip link set p$1 master br0 up" || fail "cannot link $name to the switch"
  nsenter -t "$multinode_pid" --net sh -e -c "
    ip link set lo up
    ip addr add $MULTINODE_NET.$1/24 dev eth0
    ip link set eth0 up" || fail "cannot give $name its address"
}

node_pid() { cat "$MULTINODE_DIR/$1.pid" 2>/dev/null; }

node_run() {
  pid=$(node_pid "$1") || fail "no node $1"
  shift
  nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

# The processes whose network namespace is NAME's (the holder included).
node_pids() {
  ns=$(readlink "/proc/$(node_pid "$1")/ns/net" 2>/dev/null) || return 0
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$ns" ] && echo "${d#/proc/}"
  done
  return 0
}

# node_left NAMES: how many processes of these names (a regular expression) run on the nodes (zombies do not
# count).
node_left() {
  for f in "$MULTINODE_DIR"/node*.pid; do
    [ -e "$f" ] || continue
    n=${f##*/}
    for p in $(node_pids "${n%.pid}"); do
      ! running "$p" || cat "/proc/$p/comm" 2>/dev/null
    done
  done | grep -c -E "^($1)\$" || true
}

node_kill() {
  pid=$(node_pid "$1") || return 0
  ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || { rm -f "$MULTINODE_DIR/$1.pid"; return 0; }
  [ "$ns" != "$(readlink /proc/$$/ns/net)" ] || fail "$1 is not in a namespace of its own"
  # Repeated: a process may fork while the others are being killed.
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    left=
    for d in /proc/[0-9]*; do
      [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$ns" ] || continue
      kill -9 "${d#/proc/}" 2>/dev/null && left=1
    done
    [ -n "$left" ] || break
    sleep 0.1
  done
  wait "$pid" 2>/dev/null || true
  rm -f "$MULTINODE_DIR/$1.pid"
}

nodes_down() {
  for f in "$MULTINODE_DIR"/node*.pid; do
    [ -e "$f" ] || continue
    n=${f##*/}
    node_kill "${n%.pid}"
  done
  if [ -n "$multinode_switch" ]; then
    kill "$multinode_switch" 2>/dev/null
    wait "$multinode_switch" 2>/dev/null || true
    multinode_switch=
  fi
  return 0
}

trap 'nodes_down; rm -rf "$TMP"' EXIT
trap 'exit 99' INT TERM HUP
