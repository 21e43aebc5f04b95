#!/bin/sh
# make bench-nodes: the scaling model (slurm/scaling-model, docs/scaling.md) against runs on emulated nodes
# (tests/multinode/nodes.sh: network namespaces on this machine, TCP over virtual links between them; root).
# BENCH_STEPS steps (default 300) of the default recipe, --threads 1, on 1 rank, on 2 ranks of one node (shared
# memory) and on 2 ranks of two nodes (TCP); for each 2-rank run, the model's prediction from the 1-rank run and
# the run's isolated all-reduce (--window 0: on the CPU nothing progresses the exchange during backward), and
# from its own exposed time. The nodes share this machine's cores: only the exchange's path differs.
. "${abs_top_srcdir:-.}/tests/lib.sh"
. "$abs_top_srcdir/tests/multinode/nodes.sh"
set -e
need_data
nodes_up 2
cd "$TMP"
steps=${BENCH_STEPS:-300}
# run NAME HOSTS NP: mpirun on node1 over HOSTS; metrics in NAME.json.
run() {
  node_run node1 timeout -k 10 600 "${MPIEXEC:-mpirun}" --mca plm_rsh_agent "$abs_top_srcdir/tests/multinode/rsh-agent.sh" \
    --host "$2" -np "$3" "$MNIST_DDP" --data "$MNIST_DATA" --device cpu --epochs 1 --max-steps "$steps" --threads 1 \
    --seed 1 --metrics "$TMP/$1.json" >"$TMP/$1.log" 2>&1 || { cat "$TMP/$1.log"; fail "$1: the run failed"; }
  grep -E '^(all-reduce|summary):' "$TMP/$1.log" | sed "s/^/$1: /"
}
echo "bench-nodes: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2-), $(getconf _NPROCESSORS_ONLN) cores, $steps steps"
run one node1:1 1
run shm node1:2 2
run tcp node1:1,node2:1 2
for r in shm tcp; do
  echo "== 2 ranks, $r"
  "$PYTHON3" "$abs_top_srcdir/slurm/scaling-model" --check "$TMP/one.json" "$TMP/$r.json" --window 0
done
