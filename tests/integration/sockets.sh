#!/bin/sh
# The CPU trainer opens no listening socket of its own. While 2 ranks train, every socket each rank holds
# (/proc/PID/fd) is matched by inode against the kernel's tables of listening TCP sockets, bound UDP
# sockets and listening Unix sockets (/proc/PID/net/tcp, tcp6, udp, udp6, unix):
# - with Open MPI's shared-memory transport only (--mca btl self,vader) a rank listens on nothing at all;
# - with its defaults, the only listeners are Open MPI's btl/tcp ones (one IPv4 and one IPv6 socket per
#   rank, for peers on other nodes), which the test identifies by moving btl/tcp's port range to a window
#   of its own and finding every listener inside it. Open MPI's other listeners (oob/tcp, PMIx) belong to
#   mpirun, not to the ranks.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/small" 2000 50

# The pids of the mnist_ddp processes descended from pid $1.
ranks_of() {
  for stat in /proc/[0-9]*/stat; do
    read -r pid comm _ ppid _ 2>/dev/null <"$stat" || continue
    echo "$pid $ppid $comm"
  done | awk -v root="$1" '
    { parent[$1] = $2; name[$1] = $3 }
    END { for (p in name) if (name[p] == "(mnist_ddp)") { q = p
            while (q in parent && q != root && q > 1) q = parent[q]
            if (q == root) print p } }'
}

# Every listening or bound socket pid holds, one per line: "proto local-address" (hex, as the kernel
# writes it; unix: its path or @name).
listeners() {
  pid=$1
  inodes=$(for fd in "/proc/$pid/fd"/*; do readlink "$fd"; done 2>/dev/null |
    sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | tr '\n' ' ')
  for proto in tcp tcp6 udp udp6; do
    # tcp state 0A: LISTEN; udp state 07: bound, receiving
    awk -v proto="$proto" -v inodes=" $inodes " '
      NR > 1 && (($4 == "0A" && proto ~ /tcp/) || ($4 == "07" && proto ~ /udp/)) && index(inodes, " " $10 " ") {
        print proto, $2 }' "/proc/$pid/net/$proto"
  done
  # unix: flags 00010000 is __SO_ACCEPTCON, a listening socket
  awk -v inodes=" $inodes " 'NR > 1 && $4 == "00010000" && index(inodes, " " $7 " ") { print "unix", $8 }' \
    "/proc/$pid/net/unix"
}

# train TAG MPI-OPTIONS...: starts 2 ranks, waits until both have taken training steps, and writes the
# listeners of each rank to $TMP/TAG.pid.<pid>.
train() {
  tag=$1; shift
  # shellcheck disable=SC2086
  run_np 2 "$@" "$MNIST_DDP" --data "$TMP/small" --batch-size 10 --epochs 3 --max-steps 250 --log-interval 5 >"$TMP/$tag.log" 2>&1 &
  job=$!
  trap 'kill "$job" 2>/dev/null || true; rm -rf "$TMP"' EXIT # a failed check ends the run it looked at
  i=0
  until grep -q "^epoch 1 step 5/" "$TMP/$tag.log" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -ge 600 ] || ! kill -0 "$job" 2>/dev/null; then
      cat "$TMP/$tag.log"
      fail "$tag: the run never reached step 5"
    fi
    sleep 0.1
  done
  pids=$(ranks_of "$job")
  [ "$(echo "$pids" | wc -w)" -eq 2 ] || fail "$tag: found ranks '$pids' under the launcher (pid $job), not 2"
  # Stopped while they are read (the tables of a rank that ends mid-scan would be gone), then continued.
  kill -STOP $pids 2>/dev/null || fail "$tag: a rank ended before its sockets were read; train longer"
  for pid in $pids; do
    listeners "$pid" >"$TMP/$tag.pid.$pid"
  done
  kill -CONT $pids
  wait "$job" || { cat "$TMP/$tag.log"; fail "$tag: the run failed"; }
}

train shm --mca btl self,vader
for pid in $pids; do
  [ ! -s "$TMP/shm.pid.$pid" ] || { cat "$TMP/shm.pid.$pid"; fail "rank pid $pid listens on the sockets above with btl self,vader"; }
done
echo "ok: with --mca btl self,vader no rank holds a listening or bound socket"

# Open MPI's defaults: btl/tcp's listeners only, found in a port window of this test's choosing.
lo=47300 span=50
train default --mca btl_tcp_port_min_v4 $lo --mca btl_tcp_port_range_v4 $span \
  --mca btl_tcp_port_min_v6 $lo --mca btl_tcp_port_range_v6 $span
for pid in $pids; do
  [ -s "$TMP/default.pid.$pid" ] || fail "rank pid $pid: no btl/tcp listener found (is the check blind?)"
  while read -r proto addr; do
    port=$(printf '%d' "0x${addr##*:}")
    case $proto in
      tcp | tcp6) [ "$port" -ge $lo ] && [ "$port" -lt $((lo + span)) ] && continue ;;
    esac
    fail "rank pid $pid: $proto listener on port $port is outside Open MPI's btl/tcp window [$lo, $((lo + span)))"
  done <"$TMP/default.pid.$pid"
done
echo "ok: with Open MPI's defaults the ranks' only listeners are btl/tcp's ($(cat "$TMP"/default.pid.* | wc -l) in all)"
