# Multi-node without a cluster: emulated nodes (network, UTS and mount namespaces; tests/multinode/nodes.sh)
# with Open MPI launched across them through an rsh agent that enters a node instead of ssh, and a two-node
# Slurm on them. Need root; exit 77 with the reason where namespaces cannot be created.
# soak-nodes.sh: the fault soak with a network partition among its faults.
TESTS += tests/multinode/emulated-nodes.sh tests/multinode/mpirun-nodes.sh tests/multinode/slurm-nodes.sh \
	tests/multinode/soak-nodes.sh
EXTRA_DIST += tests/multinode/emulated-nodes.sh tests/multinode/mpirun-nodes.sh tests/multinode/slurm-nodes.sh \
	tests/multinode/soak-nodes.sh \
	tests/multinode/nodes.sh tests/multinode/rsh-agent.sh
# --bootstrap-addr's check (gpu_plan_probe_port) in any build, run on the nodes by mpirun-nodes.sh.
check_PROGRAMS += tests/multinode/probe_port
tests_multinode_probe_port_SOURCES = tests/multinode/probe_port.c
