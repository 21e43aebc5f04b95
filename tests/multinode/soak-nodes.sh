#!/bin/sh
# The fault soak (tests/integration/fault-soak.sh) on two emulated nodes, one rank on each: a network
# partition joins its faults, and Open MPI's daemons must end with each job.
SOAK_NODES=2 exec sh "${abs_top_srcdir:-.}/tests/integration/fault-soak.sh"
