#!/bin/sh
# mnist_ddp on 2 emulated nodes x 2 ranks, launched the way a cluster does it: mpirun on node1 starts its
# daemon on node2 through a remote-launch agent (tests/multinode/rsh-agent.sh instead of ssh); TCP between
# the nodes, shared memory within one. Checks: the start-up table shows both hosts with local ranks 0,1 on
# each and agrees with Open MPI's own variables; the MPI progress thread runs; the result equals 4 ranks on
# one node (no thread there); replicas stay
# identical; uneven ranks per node are named; --bootstrap-addr node1:PORT is accepted on node1, refused from
# node2 and when taken; a frozen node2 is named by rank 0 (ranks, host, pids); a network partition ends every
# process on both sides, each naming the other (with the README's TCP keepalive); losing node2 mid-run ends the
# job on node1 within the step deadline, and the same command on a replacement node2 resumes from the last
# checkpoint and ends where an uninterrupted run ends.
. "${abs_top_srcdir:-.}/tests/lib.sh"
. "$abs_top_srcdir/tests/multinode/nodes.sh"
set -e
need_data
nodes_up 2
small_mnist "$TMP/data" 2048 256
cd "$TMP"

# Each rank notes what Open MPI told it, then becomes mnist_ddp.
# RANK_ERR=1: its stderr goes to a file of its own (a partitioned node's lines cannot reach mpirun).
cat >"$TMP/rank-env.sh" <<'EOF'
#!/bin/sh
echo "$OMPI_COMM_WORLD_RANK $(hostname) $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE" >"$RANK_ENV_DIR/$OMPI_COMM_WORLD_RANK"
echo $$ >"$RANK_ENV_DIR/$OMPI_COMM_WORLD_RANK.pid"
[ -z "${RANK_ERR:-}" ] || exec "$@" 2>"$RANK_ENV_DIR/$OMPI_COMM_WORLD_RANK.err"
exec "$@"
EOF
chmod +x "$TMP/rank-env.sh"
mkdir "$TMP/env"
export RANK_ENV_DIR="$TMP/env"

# on_node1 HOSTS ARGS...: mpirun on node1 over HOSTS (Open MPI's --host list), 4 ranks, bounded in time.
on_node1() {
  hosts=$1
  shift
  node_run node1 timeout -k 10 "${RUN_TIMEOUT:-300}" "${MPIEXEC:-mpirun}" \
    --mca plm_rsh_agent "$abs_top_srcdir/tests/multinode/rsh-agent.sh" --host "$hosts" -np 4 \
    "$TMP/rank-env.sh" "$MNIST_DDP" --data "$TMP/data" --device cpu "$@"
}
train="--max-steps 24 --batch-size 16 --log-interval 4 --seed 5"
fingerprint() { json_field "$1" summary fingerprint; }

# --- 2 nodes x 2 ranks -----------------------------------------------------------------------------
# shellcheck disable=SC2086 # $train: options, split on purpose
on_node1 node1:2,node2:2 $train --verbose --metrics "$TMP/two.jsonl" >two.out 2>two.err ||
  { cat two.out two.err; fail "4 ranks on node1 and node2"; }
grep -q '^mnist_ddp .*: 4 ranks on 2 nodes (launched by mpirun)' two.out || { cat two.out; fail "not 4 ranks on 2 nodes"; }
# The table: rank, host, local rank, as rank 0 gathered them from every rank. The other ranks' --verbose lines
# ("[rank 2] ...") may land between its rows: mpirun forwards each rank's output line by line.
table=$(awk '/^ +rank +host +local/ { t = 1; next } t && /^\[rank / { next }
  t && /^ +[0-9]+ / { print $1, $2, $3; next } { t = 0 }' two.out)
want=$(printf '0 node1 0\n1 node1 1\n2 node2 0\n3 node2 1')
[ "$table" = "$want" ] || { cat two.out; fail "start-up table (rank host local) is '$table', expected '$want'"; }
# Open MPI's view, each rank in its own words: the same hosts and local ranks, 2 ranks per node.
ompi=$(cat "$TMP/env/0" "$TMP/env/1" "$TMP/env/2" "$TMP/env/3")
[ "$ompi" = "$(echo "$want" | sed 's/$/ 2/')" ] || fail "OMPI_COMM_WORLD_* say '$ompi', the table '$table'"
# Even nodes: the node-local communicators have the same size everywhere (else a warning).
! grep -q 'uneven ranks per node' two.err || { cat two.err; fail "2 x 2 ranks reported as uneven"; }
echo "ok: table and OMPI_COMM_WORLD_LOCAL_RANK agree: $(echo "$table" | tr '\n' ';')"
n=$(grep -c 'replica fingerprint' two.out || true)
distinct=$(grep 'replica fingerprint' two.out | awk '{print $NF}' | sort -u | wc -l)
{ [ "$n" -eq 4 ] && [ "$distinct" -eq 1 ]; } || { grep 'replica fingerprint' two.out; fail "replicas across nodes differ ($n reports)"; }
echo "ok: 4 identical replicas across the nodes ($(fingerprint two.jsonl))"
# Across nodes the MPI progress thread runs (--comm-progress's default; tests/integration/mpi_comm checks
# its sums are exact).
grep -q '(progress thread)$' two.out || { grep 'all-reduce' two.out; fail "no progress thread across nodes"; }

# --- The same global batch on one node --------------------------------------------------------------
# --grad-shm off: MPI's all-reduce on one node too, so only the topology differs. (The default there sums in
# shared memory, with 4 ranks in another order than MPI's, which Adadelta's lr 1 amplifies past 1e-4 within
# six steps; train-gradcomm.sh compares those sums with MPI's.)
# shellcheck disable=SC2086
on_node1 node1:4 $train --grad-shm off --metrics "$TMP/one.jsonl" >one.out 2>one.err || { cat one.out one.err; fail "4 ranks on node1"; }
grep -q ': 4 ranks on 1 node ' one.out || { cat one.out; fail "not 4 ranks on 1 node"; }
# Equal up to summation order: the loss to 1e-4 relative, the accuracy to one test image in 256.
"$PYTHON3" - "$TMP/two.jsonl" "$TMP/one.jsonl" <<'PY' || fail "2 nodes and 1 node disagree"
import json, sys
def rows(p): return [json.loads(l) for l in open(p) if l.strip()]
two, one = rows(sys.argv[1]), rows(sys.argv[2])
steps = lambda rs: [r["loss"] for r in rs if r["type"] == "step"]
summ = lambda rs: [r for r in rs if r["type"] == "summary"][-1]
a, b = steps(two), steps(one)
assert len(a) == len(b) >= 6, (len(a), len(b))
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-4 * abs(y), ("step losses", a, b)
s, t = summ(two), summ(one)
assert abs(s["test_loss"] - t["test_loss"]) <= 1e-4 * t["test_loss"], (s["test_loss"], t["test_loss"])
assert abs(s["test_accuracy"] - t["test_accuracy"]) <= 1.0 / 256 + 1e-9, (s["test_accuracy"], t["test_accuracy"])
print("ok: 2 nodes and 1 node agree: losses %s, test loss %.6f / %.6f, accuracy %.4f / %.4f, fingerprints %s %s"
      % (a, s["test_loss"], t["test_loss"], s["test_accuracy"], t["test_accuracy"], s["fingerprint"], t["fingerprint"]))
PY

# --- Uneven ranks per node: named at start-up ---------------------------------------------------------
on_node1 node1:3,node2:1 --epochs 0 >uneven.out 2>uneven.err || { cat uneven.out uneven.err; fail "3 + 1 ranks"; }
grep -q 'uneven ranks per node (1 to 3 on 2 nodes)' uneven.err || { cat uneven.err; fail "3 + 1 ranks: no uneven warning"; }
echo "ok: 3 + 1 ranks: $(grep -m1 -o 'uneven ranks per node ([^)]*)' uneven.err)"

# --- --bootstrap-addr node1:PORT: rank 0's check (GPU builds run it before NCCL's bootstrap; probe_port runs
# the same check in any build), by host name, where rank 0 runs.
probe=$abs_top_builddir/tests/multinode/probe_port
[ -x "$probe" ] || fail "no $probe (make check builds it)"
port=29611
node_run node1 "$probe" "node1:$port" >probe1.out || { cat probe1.out; fail "node1:$port refused on node1"; }
# Rank 0 on node2 (a job whose first node is not node1): the address belongs to another node.
node_run node2 "$probe" "node1:$port" >probe2.out && fail "node1:$port accepted on node2: $(cat probe2.out)"
grep -q "node1 ($MULTINODE_NET.1) is not an address of node2, where rank 0 runs" probe2.out ||
  { cat probe2.out; fail "node2's refusal does not name node1's address and node2"; }
# A listener on node1's port: refused as in use.
node_run node1 "$PYTHON3" -c "import socket, time; s = socket.socket(); s.bind(('$MULTINODE_NET.1', $port)); s.listen(1); open('$TMP/listening', 'w'); time.sleep(30)" &
listener=$!
for _ in $(seq 50); do [ -e "$TMP/listening" ] && break; sleep 0.1; done
node_run node1 "$probe" "node1:$port" >probe3.out && fail "node1:$port accepted on node1 while taken: $(cat probe3.out)"
kill "$listener"
grep -q "port $port on node1 ($MULTINODE_NET.1) is in use" probe3.out || { cat probe3.out; fail "a taken port on node1 not named"; }
echo "ok: --bootstrap-addr node1:$port accepted on node1; refused while taken, and from node2: $(cat probe2.out)"

# --- A frozen node is named ----------------------------------------------------------------------------
# Both ranks on node2 stopped (SIGSTOP) mid-run: the job ends at the step deadline plus the 5 s window, with
# one line from rank 0 naming both ranks, their node and pids.
rm -f "$TMP"/env/*.pid
on_node1 node1:2,node2:2 --max-steps 100000 --batch-size 16 --log-interval 1 --step-timeout 3 \
  >frozen.out 2>frozen.err &
job=$!
for _ in $(seq 600); do
  grep -q 'step 2/' frozen.out && [ -s "$TMP/env/2.pid" ] && [ -s "$TMP/env/3.pid" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
grep -q 'step 2/' frozen.out || { cat frozen.out frozen.err; fail "the job to freeze did not start"; }
p2=$(cat "$TMP/env/2.pid") p3=$(cat "$TMP/env/3.pid")
start=$(date +%s)
kill -STOP "$p2" "$p3"
set +e
wait "$job"
rc=$?
set -e
took=$(($(date +%s) - start))
[ "$rc" -eq 69 ] || { cat frozen.out frozen.err; fail "frozen node2: exit $rc, expected 69"; }
[ "$took" -le 20 ] || fail "frozen node2: the job took $took s to end (deadline 3 s, window 5 s)"
named="ranks 2 (node2, pid $p2), 3 (node2, pid $p3) did not answer"
grep ': error: ' frozen.err | grep -F -e "$named" | grep -qF '[rank 0/4 on node1, ' ||
  { cat frozen.err; fail "frozen node2: no line from rank 0 saying '$named'"; }
echo "ok: frozen node2 named in $took s: $(grep -m1 ': error: ' frozen.err)"

# --- A network partition ------------------------------------------------------------------------------
# node2's link taken down mid-run, every process left alive. mnist_ddp: each side names the other's ranks
# (node2's line stays in its own file) and every rank ends within the deadline + 15 s. Open MPI: mpirun and
# node2's daemon then wait for each other, beyond any bound, unless TCP keepalive on their link is shorter
# than --step-timeout (the README's advice): then they end the whole job first, naming node2.
# partition NAME: starts the job (more options in $extra), takes node2's link down after step 5; took: seconds
# from the partition until mpirun ended (or until $1 s passed), $rc its status.
partition() {
  rm -f "$TMP"/env/*.pid "$TMP"/env/*.err
  # shellcheck disable=SC2086
  RANK_ERR=1 on_node1 node1:2,node2:2 --max-steps 100000 --batch-size 16 --log-interval 1 $extra >partition.out \
    2>partition.err &
  job=$!
  for _ in $(seq 600); do
    grep -q 'step 5/' partition.out && [ -s "$TMP/env/2.pid" ] && [ -s "$TMP/env/3.pid" ] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "step 5/" partition.out || { cat partition.out partition.err "$TMP"/env/*.err; fail "the job to partition did not start"; }
  start=$(date +%s)
  nsenter -t "$multinode_switch" --net ip link set p2 down
  while kill -0 "$job" 2>/dev/null && [ $(($(date +%s) - start)) -lt "$1" ]; do sleep 0.2; done
  took=$(($(date +%s) - start))
}
# Open MPI's defaults: the ranks end by themselves, the launcher does not.
extra="--step-timeout 3" partition 18
[ "$(node_left mnist_ddp)" -eq 0 ] || fail "partition: $(node_left mnist_ddp) ranks still run $took s after it (deadline 3 s)"
for i in 0 2; do
  grep -q "did not complete within --step-timeout 3 s: ranks $((2 - i)) (node$((2 - i / 2)), pid [0-9]*), $((3 - i)) (node$((2 - i / 2)), pid [0-9]*) did not answer" "$TMP/env/$i.err" ||
    { cat "$TMP"/env/*.err; fail "partition: rank $i does not name the other side's ranks"; }
done
echo "ok: partition: each side named the other's ranks and every rank ended; mpirun still waits after $took s"
for p in $(node_pids node1); do grep -q -x -E 'mpirun|timeout' "/proc/$p/comm" 2>/dev/null && kill -9 "$p"; done
wait "$job" 2>/dev/null || true
node_kill node2 # its daemon waits too: a fresh node2
node_add 2
# With keepalive (idle 2 s, 2 probes 1 s apart) shorter than the deadline (8 s): everything ends.
export OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 OMPI_MCA_oob_tcp_keepalive_probes=2
extra="--step-timeout 8" partition 30
unset OMPI_MCA_oob_tcp_keepalive_time OMPI_MCA_oob_tcp_keepalive_intvl OMPI_MCA_oob_tcp_keepalive_probes
set +e
wait "$job"
rc=$?
set -e
[ "$took" -le 15 ] && [ "$rc" -ne 0 ] || { cat partition.err; fail "partition with keepalive: mpirun ran $took s after it (exit $rc)"; }
grep -q 'Remote daemon: .* on node node2' partition.err || { cat partition.err; fail "partition: mpirun does not name node2"; }
for _ in $(seq 50); do [ "$(node_left 'mnist_ddp|orted|mpirun')" -eq 0 ] && break; sleep 0.2; done
[ "$(node_left 'mnist_ddp|orted|mpirun')" -eq 0 ] || fail "partition with keepalive: processes left on the nodes"
node_kill node2
node_add 2
echo "ok: partition with keepalive: mpirun ended in $took s (exit $rc), naming node2; no process left"

# --- Losing node2 mid-run -----------------------------------------------------------------------------
ckpt="--checkpoint-dir $TMP/ckpt --checkpoint-every 2 --step-timeout 10 --comm-timeout 30"
bound=25
# shellcheck disable=SC2086
on_node1 node1:2,node2:2 $train $ckpt --metrics "$TMP/lost.jsonl" >lost.out 2>lost.err &
job=$!
for _ in $(seq 600); do
  ls "$TMP"/ckpt/ckpt-*.h5 >/dev/null 2>&1 && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
ls "$TMP"/ckpt/ckpt-*.h5 >/dev/null 2>&1 || { cat lost.out lost.err; fail "no checkpoint before the node was to be lost"; }
start=$(date +%s)
node_kill node2
set +e
wait "$job"
rc=$?
set -e
took=$(($(date +%s) - start))
[ "$rc" -ne 0 ] || { cat lost.out lost.err; fail "the job exited 0 although node2 was lost"; }
[ "$took" -le "$bound" ] || fail "the job took $took s to end after node2 was lost (bound $bound s)"
left=$(for p in $(node_pids node1); do tr "\\0" " " <"/proc/$p/cmdline" 2>/dev/null; echo; done | grep -cF -- "$MNIST_DDP" || true)
[ "$left" -eq 0 ] || fail "$left mnist_ddp processes left on node1"
last=$(find "$TMP/ckpt" -name 'ckpt-*.h5' | sed -n 's/.*ckpt-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tail -n 1)
echo "ok: node2 lost after step $last's checkpoint: the job ended on node1 in $took s with exit $rc"

# A replacement node2, the same command: resumes from the newest checkpoint, ends as if never interrupted.
node_add 2
# shellcheck disable=SC2086
on_node1 node1:2,node2:2 $train $ckpt --metrics "$TMP/lost.jsonl" >resume.out 2>resume.err ||
  { cat resume.out resume.err; fail "the restart failed"; }
grep -q "^resumed from step $last (restart 1)" resume.out || { cat resume.out; fail "the restart did not resume from step $last"; }
[ "$(fingerprint lost.jsonl)" = "$(fingerprint two.jsonl)" ] ||
  fail "resumed run ends at $(fingerprint lost.jsonl), the uninterrupted one at $(fingerprint two.jsonl)"
echo "ok: $(grep -m1 '^resumed from' resume.out | cut -d: -f1); same parameters as the uninterrupted run"
