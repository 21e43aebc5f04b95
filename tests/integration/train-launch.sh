#!/bin/sh
# The launcher's environment, cross-checked with MPI (src/comm/bootstrap.c): every way it can disagree with
# MPI or be corrupt ends every rank with 78 and a line naming the variable, before any data is read;
# consistent srun- and mpirun-style environments run, and SLURM_CPUS_PER_TASK sets the threads per rank;
# OpenBLAS's kernels and Open MPI's all-reduce algorithm follow what the environment chose.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
# Only the variables each case sets may be seen, whatever job this test itself runs in.
unset SLURM_NTASKS SLURM_PROCID SLURM_LOCALID SLURM_STEP_ID SLURM_STEP_NUM_TASKS SLURM_CPUS_PER_TASK \
  PMIX_RANK PMI_RANK PMI_FD OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_LOCAL_RANK
small_mnist "$TMP/small" 100 50
run="$MNIST_DDP --data $TMP/small --batch-size 10 --epochs 0"

# launch_fails VAR CMD...: exit 78, and each error line (one per rank that sees the problem) names VAR.
launch_fails() {
  var=$1; shift
  expect_fail 78 "error: .*$var" "$@"
  if grep 'error:' "$TMP/err" | grep -v -q -e "$var"; then
    cat "$TMP/err" >&2
    fail "an error line of '$*' does not name $var"
  fi
}

# srun_like NP NTASKS PROCID_SHIFT CMD...: NP ranks started by mpirun, dressed as srun's tasks (srun sets
# no OMPI_* variables): SLURM_NTASKS=NTASKS, SLURM_PROCID = (MPI rank + PROCID_SHIFT) mod NP.
srun_like() {
  np=$1 ntasks=$2 procid_shift=$3; shift 3
  # shellcheck disable=SC2016 # expanded by the rank's shell
  run_np "$np" sh -c 'n=$1 s=$2 np=$3; shift 3
    unset OMPI_COMM_WORLD_SIZE
    export SLURM_STEP_ID=0 SLURM_NTASKS="$n" SLURM_PROCID=$(( (OMPI_COMM_WORLD_RANK + s) % np ))
    exec "$@"' sh "$ntasks" "$procid_shift" "$np" "$@"
}

# shellcheck disable=SC2086
{
  # A value that is not a non-negative integer: a corrupted environment.
  launch_fails "SLURM_NTASKS='abc'" run_np 2 -x SLURM_NTASKS=abc $run
  launch_fails "OMPI_COMM_WORLD_LOCAL_RANK='-1'" run_np 2 env OMPI_COMM_WORLD_LOCAL_RANK=-1 $run
  # mpirun's variables against MPI (mpirun overrides -x for its own, so env sets them in the rank).
  launch_fails OMPI_COMM_WORLD_SIZE=3 run_np 2 env OMPI_COMM_WORLD_SIZE=3 $run
  # shellcheck disable=SC2016 # expanded by the rank's shell: ranks 0 and 1 swap their numbers
  launch_fails OMPI_COMM_WORLD_RANK run_np 2 sh -c \
    'export OMPI_COMM_WORLD_RANK=$((1 - OMPI_COMM_WORLD_RANK)); exec "$@"' sh $run
  launch_fails OMPI_COMM_WORLD_LOCAL_RANK=1 run_np 2 env OMPI_COMM_WORLD_LOCAL_RANK=1 $run
  # srun's variables against MPI.
  launch_fails SLURM_NTASKS=3 srun_like 2 3 0 $run
  launch_fails SLURM_PROCID srun_like 2 2 1 $run
  # srun --mpi=none starts singletons (run here as srun would, without mpirun); PMI missing from MPI:
  # each task is a world of 1 ...
  launch_fails "Slurm started 2 tasks but MPI sees each as a world of 1" \
    env SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=2 $run
  # ... or, seen before MPI_Init from SLURM_STEP_NUM_TASKS, task 0 says so and the others exit silently.
  launch_fails "Slurm started 2 tasks without PMI" env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 $run
  rc=0
  env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 $run >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" -ne 78 ] || [ -s "$TMP/err" ]; then
    cat "$TMP/err" >&2
    fail "task 1 without PMI: exit $rc (expected 78, silently)"
  fi
  # One task needs no wire-up: srun -n 1 --mpi=none trains, without a word about PMI.
  env SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=0 SLURM_NTASKS=1 $run >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err" >&2; fail "srun -n 1 without PMI refused"; }
  ! grep -q 'PMI' "$TMP/err" || { cat "$TMP/err" >&2; fail "srun -n 1 without PMI: a word about PMI"; }
  launch_fails "SLURM_CPUS_PER_TASK='2x'" run_np 2 -x SLURM_CPUS_PER_TASK=2x $run
}

# threads_of LOG: the threads column of the start-up table, one line per rank.
threads_of() {
  awk '/^ *rank +host +local +device +threads$/ {t = 1; next} t && $1 ~ /^[0-9]+$/ {print $NF; next} {t = 0}' "$1"
}
# runs_with THREADS LAUNCHER CMD...: CMD succeeds, launched by LAUNCHER, with THREADS on each of 2 ranks.
runs_with() {
  want=$1 launcher=$2; shift 2
  "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "'$*' failed"; }
  grep -q "2 ranks on 1 node (launched by $launcher)" "$TMP/out" || { cat "$TMP/out" >&2; fail "not launched by $launcher: $*"; }
  [ "$(threads_of "$TMP/out" | tr '\n' ' ')" = "$want $want " ] ||
    { cat "$TMP/out" >&2; fail "expected $want threads on each rank: $*"; }
  echo "ok: $want threads per rank, launched by $launcher: $*"
}
# shellcheck disable=SC2086
{
  runs_with 1 mpirun run_np 2 $run
  runs_with 3 mpirun run_np 2 -x SLURM_CPUS_PER_TASK=3 $run
  runs_with 2 mpirun run_np 2 -x SLURM_CPUS_PER_TASK=3 $run --threads 2
  # mpirun inside an allocation: Slurm's task count describes mpirun's daemons, not the ranks.
  runs_with 1 mpirun run_np 2 -x SLURM_NTASKS=5 -x SLURM_STEP_ID=0 -x SLURM_PROCID=0 $run
  runs_with 3 srun srun_like 2 2 0 env SLURM_CPUS_PER_TASK=3 $run
}

# OpenBLAS's kernels (src/nn/cpu/blas_core.c): OpenBLAS 0.3.21 takes a CPU newer than itself (Emerald Rapids)
# for a Prescott; on a CPU with AVX2 and FMA mnist_ddp never trains on that fallback, whatever OpenBLAS
# detects here. A user's OPENBLAS_CORETYPE is kept, even Prescott.
# kernels_are WANT CMD...: CMD succeeds and rank 0 reports OpenBLAS's WANT kernels (a regular expression).
kernels_are() {
  want=$1; shift
  "$@" >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "'$*' failed"; }
  grep -E -q "^OpenBLAS kernels: $want( |$)" "$TMP/out" || { cat "$TMP/out" >&2; fail "not OpenBLAS's $want kernels: $*"; }
  echo "ok: OpenBLAS's $(sed -n 's/^OpenBLAS kernels: //p' "$TMP/out") kernels: $*"
}
# shellcheck disable=SC2086
(
  unset OPENBLAS_CORETYPE
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    kernels_are '[^P][A-Za-z0-9]*' run_np 2 $run
  else
    kernels_are '[A-Za-z0-9]+' run_np 2 $run
  fi
  kernels_are Prescott run_np 2 -x OPENBLAS_CORETYPE=Prescott $run
  kernels_are Haswell run_np 2 -x OPENBLAS_CORETYPE=Haswell $run
)

# Open MPI's nonblocking all-reduce: bootstrap picks Rabenseifner's algorithm unless the environment chose
# one before; the collectives suite reads back what the library took, and expects the preset here.
run_np 2 -x CK_FORK=no -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 "$abs_top_builddir/tests/integration/mpi_comm" \
  >"$TMP/out" 2>&1 || { cat "$TMP/out" >&2; fail "a preset coll_libnbc_iallreduce_algorithm=1 did not stand"; }
echo "ok: a preset coll_libnbc_iallreduce_algorithm stands"

# Threads against the CPUs they may run on (src/comm/cpu_fit.c): where they take turns, rank 0 warns once per
# kind, with the fix for the launcher. cpus: the CPUs this machine has online.
cpus=$(getconf _NPROCESSORS_ONLN)
# fit_warns PATTERN CMD...: CMD succeeds and warns once that threads take turns, in words matching PATTERN
# (a basic regular expression); PATTERN "": no such warning.
fit_warns() {
  want=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "'$*' failed"; }
  got=$(grep 'take turns' "$TMP/err" || true)
  if [ -z "$want" ]; then
    [ -z "$got" ] || fail "'$*': a warning where the threads fit: $got"
  elif [ "$(printf '%s\n' "$got" | grep -c .)" != 1 ] || ! printf '%s\n' "$got" | grep -q -- "$want"; then
    cat "$TMP/err" >&2
    fail "'$*': not one warning matching '$want'"
  fi
  echo "ok: ${got:-no warning}: $*"
}
pinned() { taskset -c 0 timeout -k 10 120 "${MPIEXEC:-mpirun}" --oversubscribe --bind-to none "$@"; }
# shellcheck disable=SC2086
{
  fit_warns "" run_np 1 --bind-to none $run --threads 1
  fit_warns "runs $((cpus + 1)) threads (1 rank) on its $cpus CPUs: they take turns; --threads $cpus fits" \
    run_np 1 --bind-to none $run --threads $((cpus + 1))
  if [ "$cpus" -ge 2 ]; then
    fit_warns "^mnist_ddp: warning: --threads 2: rank 0 on .* may run on 1 CPU (its affinity mask), so its threads take \
turns; mpirun binds each rank .*'mpirun --map-by slot:PE=2' gives each rank 2 cores of its own" pinned -np 1 $run --threads 2
    # The whole line: one node, so no "more nodes alike" (each node's ranks count once).
    fit_warns "^mnist_ddp: warning: [^ ]* runs 2 threads (2 ranks) on 1 of its $cpus CPUs, the ranks' affinity masks \
overlapping: they take turns; mpirun binds each rank to one core for 2 ranks or fewer, to a socket above: \
'mpirun --map-by slot:PE=1' gives each rank 1 core of its own \[rank 0/2 on [^ ]*, src/comm/cpu_fit.c:[0-9]*\]$" \
      pinned -np 2 $run
    fit_warns "rank 0 on .* may run on 1 CPU .*'srun --cpus-per-task=2' gives each rank 2 CPUs" \
      srun_like 1 1 0 taskset -c 0 $run --threads 2
    fit_warns "rank 0 on .* may run on 1 CPU .*the process's affinity (taskset" taskset -c 0 $run --threads 2
  else
    echo "skip: one CPU online: no affinity mask narrower than the machine to test"
  fi
}
