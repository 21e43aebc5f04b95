#!/bin/bash
# select-port: distinct, in-range, deterministic ports, and busy ports skipped.
# Run by `make check`, or by hand: abs_top_srcdir=$PWD tests/slurm/select-port.sh
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
sp=$srcdir/slurm/select-port
# Only what each check sets may reach select-port (not a surrounding job's IDs or MASTER_ADDR).
unset MASTER_ADDR MNIST_DDP_PORT_MIN MNIST_DDP_PORT_MAX SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID \
    SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX
work=$(mktemp -d) || exit 99
listener=
cleanup() {
    if [ -n "$listener" ]; then kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null; fi
    rm -rf "$work"
}
trap cleanup EXIT

# A listener to occupy a port needs python3.
if ! command -v python3 > /dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -q python3 || { apt-get update -q && apt-get install -y -q python3; }; } > /dev/null 2>&1 ||
        { echo "ERROR: python3 (to hold a port busy) cannot be installed"; exit 99; }
fi

passes=0 failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

# The range select-port must stay in: the configured one minus the kernel's ephemeral range.
eph=$(cat /proc/sys/net/ipv4/ip_local_port_range)
elo=${eph%%[!0-9]*} ehi=${eph##*[!0-9]}
echo "ephemeral range: $elo-$ehi"

# ports MIN MAX FILE JOB FIRST LAST [STEP]: into FILE, one line each, the ports of tasks FIRST,
# FIRST+STEP, ... of array job JOB whose task IDs run FIRST-LAST, with the port range MIN-MAX. The tasks in
# two halves at once (select-port only reads; ~18 ms a call, some 1,700 calls in all), in order in FILE.
ports() {
    local min=$1 max=$2 out=$3 job=$4 first=$5 last=$6 tasks half pid rc=0
    mapfile -t tasks < <(seq "$first" "${7:-1}" "$last")
    half=$(((${#tasks[@]} + 1) / 2))
    ask "${tasks[@]:0:half}" > "$out.1" &
    pid=$!
    ask "${tasks[@]:half}" > "$out.2" || rc=1
    wait "$pid" || rc=1
    cat "$out.1" "$out.2" > "$out"
    rm -f "$out.1" "$out.2"
    return "$rc"
}
# ask TASK...: select-port for each task, with ports' range and job.
ask() {
    local t
    for t; do
        MNIST_DDP_PORT_MIN=$min MNIST_DDP_PORT_MAX=$max SLURM_ARRAY_JOB_ID=$job SLURM_ARRAY_TASK_ID=$t \
            SLURM_ARRAY_TASK_MIN=$first SLURM_ARRAY_TASK_MAX=$last "$sp" || return 1
    done
}

# check_set NAME FILE MIN MAX COUNT: FILE holds COUNT distinct ports in MIN-MAX, none ephemeral.
check_set() {
    local name=$1 file=$2 min=$3 max=$4 count=$5 bad dup
    bad=$(awk -v lo="$min" -v hi="$max" -v elo="$elo" -v ehi="$ehi" \
        '$1 !~ /^[0-9]+$/ || $1 < lo || $1 > hi || ($1 >= elo && $1 <= ehi)' "$file" | head -3)
    dup=$(sort "$file" | uniq -d | head -3)
    if [ "$(wc -l < "$file")" -ne "$count" ]; then
        fail "$name: $(wc -l < "$file") ports, expected $count"
    elif [ -n "$bad" ]; then
        fail "$name: ports outside $min-$max or in the ephemeral range: $(echo "$bad" | tr '\n' ' ')"
    elif [ -n "$dup" ]; then
        fail "$name: repeated ports: $(echo "$dup" | tr '\n' ' ')"
    else
        pass "$name: $count distinct ports in $min-$max"
    fi
}

# 1. Every task of a 1,000-task array gets its own port, and the same one when asked again.
ports 20000 29999 "$work/array" 4711 0 999 || fail "select-port failed for the 1,000-task array"
check_set "1,000-task array" "$work/array" 20000 29999 1000
ports 20000 29999 "$work/again" 4711 0 999 10
if awk 'NR % 10 == 1' "$work/array" | cmp -s - "$work/again"; then
    pass "deterministic (every 10th task asked again)"
else
    fail "second run gave other ports"
fi

# 2. Adjacent job IDs: the naive 10000 + job%10000 + task gives 12345/5 and 12350/0 the same port.
a=$(SLURM_ARRAY_JOB_ID=12345 SLURM_ARRAY_TASK_ID=5 "$sp")
b=$(SLURM_ARRAY_JOB_ID=12350 SLURM_ARRAY_TASK_ID=0 "$sp")
if [ -n "$a" ] && [ "$a" != "$b" ]; then pass "job 12345 task 5 -> $a, job 12350 task 0 -> $b"
else fail "job 12345 task 5 and job 12350 task 0 both got '$a'"; fi
# Ten consecutive jobs with 60-task arrays each: 600 distinct ports.
: > "$work/adjacent"
for job in $(seq 12345 12354); do
    ports 20000 29999 "$work/one" "$job" 0 59 || fail "select-port failed for job $job"
    cat "$work/one" >> "$work/adjacent"
done
check_set "10 adjacent jobs x 60 tasks" "$work/adjacent" 20000 29999 600

# 3. A range overlapping the ephemeral range is clipped to the part outside it.
if [ "$elo" -gt 1524 ]; then
    ports $((elo - 500)) $((elo + 499)) "$work/clipped" 99 0 499 || fail "select-port failed on the clipped range"
    check_set "range $((elo - 500))-$((elo + 499)) clipped" "$work/clipped" $((elo - 500)) $((elo - 1)) 500
fi
if MNIST_DDP_PORT_MIN=$elo MNIST_DDP_PORT_MAX=$ehi SLURM_JOB_ID=1 "$sp" 2> "$work/err"; then
    fail "a range inside the ephemeral range was accepted"
elif grep -q 'ephemeral' "$work/err"; then pass "range inside the ephemeral range refused: $(cat "$work/err")"
else fail "unclear error for a range inside the ephemeral range: $(cat "$work/err")"; fi
if env -u SLURM_JOB_ID -u SLURM_ARRAY_JOB_ID "$sp" 2> "$work/err"; then fail "ran without a job ID"
else pass "no job ID refused: $(cat "$work/err")"; fi

# The bounds of the range: 1024 and 65535 are ports, 1023 and 65536 are not (N-1, N, N+1 of each limit).
# (Ranges far from the ephemeral one, so no clipping moves them; MASTER_ADDR elsewhere, so a service that
# listens on a low port here does not move the answer.)
bound() { # bound MIN MAX: select-port's stdout, or "exit CODE: STDERR"
    local out rc
    out=$(MASTER_ADDR=another-node MNIST_DDP_PORT_MIN=$1 MNIST_DDP_PORT_MAX=$2 SLURM_JOB_ID=1 "$sp" 2> "$work/err") &&
        rc=0 || rc=$?
    if [ "$rc" = 0 ]; then echo "$out"; else echo "exit $rc: $(cat "$work/err")"; fi
}
for r in 1024:1024 1024:1025 65535:65535 65534:65535; do
    got=$(bound "${r%:*}" "${r#*:}")
    if [ "$elo" -le "${r#*:}" ] && [ "$ehi" -ge "${r%:*}" ]; then continue; fi # inside this kernel's ephemeral range
    if [ "$got" -ge "${r%:*}" ] 2> /dev/null && [ "$got" -le "${r#*:}" ]; then pass "range ${r/:/-} accepted: port $got"
    else fail "range ${r/:/-} gave '$got'"; fi
done
for r in 1023:1100 1000:1023 60000:65536; do
    got=$(bound "${r%:*}" "${r#*:}")
    want="exit 64: select-port: port range ${r/:/-} is not within 1024-65535"
    if [ "$got" = "$want" ]; then pass "range ${r/:/-} refused: $got"; else fail "range ${r/:/-} gave '$got', want '$want'"; fi
done

# A range reaching past both ends of the ephemeral range keeps its larger piece; of two equal pieces the lower.
# Pieces of k+1 and k ports, k and k, k and k+1 (a tie between N-1 and N+1).
if [ "$elo" -gt 1124 ] && [ "$ehi" -lt 65435 ]; then
    for case in 'lower 101 100' 'lower 100 100' 'upper 100 101'; do
        read -r -a c <<< "$case"
        set -- "${c[@]}"
        min=$((elo - $2)) max=$((ehi + $3))
        if [ "$1" = lower ]; then lo=$min hi=$((elo - 1)); else lo=$((ehi + 1)) hi=$max; fi
        ports "$min" "$max" "$work/split" 5 0 99 || fail "select-port failed on $min-$max"
        check_set "range $min-$max, pieces of $2 and $3 ports: the $1" "$work/split" "$lo" "$hi" 100
    done
fi
# 4. Sourced, it exports MASTER_PORT (as the sbatch templates use it, under set -euo pipefail).
got=$(SLURM_JOB_ID=777 bash -c 'set -euo pipefail; . "$1"; printenv MASTER_PORT' sh "$sp")
want=$(SLURM_JOB_ID=777 "$sp")
if [ -n "$got" ] && [ "$got" = "$want" ]; then pass "sourced: MASTER_PORT=$got exported"
else fail "sourced gave '$got', command gave '$want'"; fi

# 5. A busy port on this host is skipped, deterministically, to the next slot; a busy port on
# another MASTER_ADDR cannot be seen and is returned with a note.
port=$(SLURM_JOB_ID=31337 "$sp")
timeout 120 python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
time.sleep(120)' "$port" &
listener=$!
hex=$(printf ':%04X' "$port")
for _ in $(seq 100); do
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' /proc/net/tcp && break
    sleep 0.1
done
busy=$(SLURM_JOB_ID=31337 "$sp" 2> "$work/err")
busy2=$(SLURM_JOB_ID=31337 "$sp" 2> /dev/null)
next=$((20000 + (port - 20000 + 1) % 10000))
if [ "$busy" = "$next" ] && [ "$busy2" = "$busy" ] && grep -q "port $port is busy" "$work/err"; then
    pass "busy port $port skipped to $busy ($(cat "$work/err"))"
else
    fail "with $port busy got '$busy' then '$busy2', expected $next; stderr: $(cat "$work/err")"
fi
remote=$(SLURM_JOB_ID=31337 MASTER_ADDR=some-other-node "$sp" 2> "$work/err")
if [ "$remote" = "$port" ] && grep -q 'not checked' "$work/err"; then pass "other MASTER_ADDR: unchecked $remote with a note"
else fail "other MASTER_ADDR gave '$remote': $(cat "$work/err")"; fi
kill "$listener"; wait "$listener" 2>/dev/null; listener=
free=$(SLURM_JOB_ID=31337 "$sp")
if [ "$free" = "$port" ]; then pass "port $port chosen again once free"; else fail "freed port gave '$free'"; fi

# Only a listener makes a port busy: a connection whose local end is the port (here bound to it on purpose,
# SO_REUSEADDR, as a listener with that flag may still bind it) leaves the port to the job.
port=$(SLURM_JOB_ID=4242 "$sp")
timeout 120 python3 -c '
import socket, sys, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind(("127.0.0.1", int(sys.argv[1]))); c.connect(srv.getsockname()); a, _ = srv.accept()
time.sleep(120)' "$port" &
listener=$!
hex=$(printf ':%04X' "$port")
for _ in $(seq 100); do
    awk -v p="$hex" '$4 == "01" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' /proc/net/tcp && break
    sleep 0.1
done
got=$(SLURM_JOB_ID=4242 "$sp" 2> "$work/err")
if [ "$got" = "$port" ] && [ ! -s "$work/err" ]; then pass "a connection from port $port (no listener): $got, not skipped"
else fail "a connection from port $port (no listener) gave '$got': $(cat "$work/err")"; fi
kill "$listener"; wait "$listener" 2>/dev/null; listener=
echo "select-port: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
