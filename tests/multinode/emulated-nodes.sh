#!/bin/sh
# The emulated nodes themselves (tests/multinode/nodes.sh): each has its own host name, resolves the
# others by name, reaches them over TCP on its private link and nothing else (no default route), this
# machine's network is untouched, a lost node takes every one of its processes with it, and the test
# leaves no namespace process behind.
. "${abs_top_srcdir:-.}/tests/lib.sh"
. "$abs_top_srcdir/tests/multinode/nodes.sh"
set -e

# This machine's own network is left as it was: no new interface, address or route.
host_net() { ip -o link show | cut -d: -f2; ip -o addr show | awk '{print $2, $4}'; ip route show; }
before=$(host_net)
nodes_up 2
[ "$(host_net)" = "$before" ] ||
  fail "nodes_up changed this machine's interfaces, addresses or routes"
for i in 1 2; do
  h=$(node_run "node$i" hostname)
  [ "$h" = "node$i" ] || fail "node$i calls itself '$h'"
done
[ "$(hostname)" != node1 ] || fail "the test's own host name changed"
addr=$(node_run node2 getent hosts node1 | awk '{print $1}')
[ "$addr" = "$MULTINODE_NET.1" ] || fail "node2 resolves node1 to '$addr'"
getent hosts node1 >/dev/null 2>&1 && fail "node1 resolves outside the nodes: the hosts file leaked"
routes=$(node_run node1 ip -4 route show)
[ "$routes" = "$MULTINODE_NET.0/24 dev eth0 proto kernel scope link src $MULTINODE_NET.1 " ] ||
  [ "$routes" = "$MULTINODE_NET.0/24 dev eth0 proto kernel scope link src $MULTINODE_NET.1" ] ||
  fail "node1 has routes beyond its link: $routes"
echo "ok: node1 and node2 name each other ($addr); node1's only route: $routes"

# TCP from node2 to a listener on node1, by name.
cat >"$TMP/serve.py" <<'PY'
import socket, sys
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
c, peer = s.accept(); c.sendall(("hello from %s to %s" % (socket.gethostname(), peer[0])).encode()); c.close()
PY
node_run node1 "$PYTHON3" "$TMP/serve.py" "$TMP/port" &
server=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
port=$(cat "$TMP/port")
got=$(node_run node2 "$PYTHON3" -c "import socket; print(socket.create_connection(('node1', $port), 5).recv(100).decode())")
wait "$server"
[ "$got" = "hello from node1 to $MULTINODE_NET.2" ] || fail "node2 -> node1 over TCP: '$got'"
echo "ok: $got"

# in_ns NS: the processes in network namespace NS.
in_ns() {
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
  done
  return 0
}

# A lost node: its processes all die, the other node's do not.
node_run node2 sleep 300 &
node_run node1 sleep 300 &
sleep 0.5
ns1=$(readlink "/proc/$(node_pid node1)/ns/net")
ns2=$(readlink "/proc/$(node_pid node2)/ns/net")
n2=$(in_ns "$ns2" | wc -l)
[ "$n2" -ge 2 ] || fail "node2 shows $n2 processes"
node_kill node2
[ -z "$(in_ns "$ns2")" ] || fail "processes of node2 outlived node_kill: $(in_ns "$ns2")"
[ "$(in_ns "$ns1" | wc -l)" -ge 2 ] || fail "node_kill node2 killed node1's processes"
echo "ok: node_kill node2 ended its $n2 processes, node1's live on"

# Everything goes on the way out: nodes_down leaves no process in a node's namespace.
node_add 2
ns2=$(readlink "/proc/$(node_pid node2)/ns/net")
[ "$(node_run node2 hostname)" = node2 ] || fail "node2 did not come back"
nodes_down
[ -z "$(in_ns "$ns1")$(in_ns "$ns2")" ] || fail "processes outlived nodes_down: $(in_ns "$ns1") $(in_ns "$ns2")"
echo "ok: node2 re-created, and nodes_down left no process in the nodes"
