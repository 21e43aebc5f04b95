#!/bin/sh
# --resume never where the checkpoint directory holds checkpoints (another run's, or an earlier start's): they
# are moved into DIR/superseded-<UTC time>[-k]/, saying so in one line, so rotation keeps this run's files (it
# kept the higher-numbered older ones before, deleting every checkpoint the new run wrote) and the next start
# with --resume auto resumes this run. An empty directory starts from scratch as before; a directory name
# taken 100 times over for this second is refused with 74 and moves nothing.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
small_mnist "$TMP/data" 400 50 # 1 rank x 16: 25 steps
common="--data $TMP/data --batch-size 16 --epochs 1 --log-interval 100 --threads 1 --checkpoint-dir $TMP/ck"
ckpt() { printf '%s/ckpt-%012d.h5' "$1" "$2"; }
train() { # train NAME OPTIONS...: output in $TMP/NAME.log
  name=$1; shift
  # shellcheck disable=SC2086
  run_np 1 "$MNIST_DDP" $common "$@" >"$TMP/$name.log" 2>&1 || { cat "$TMP/$name.log"; fail "run $name"; }
}
listing() { (cd "$TMP/ck" && find . -name '*.h5' | sort | tr '\n' ' '); }

train empty --seed 1 --max-steps 20 --checkpoint-every 10 --resume never
grep -qx 'resume: --resume never, starting from scratch' "$TMP/empty.log" || { cat "$TMP/empty.log"; fail "empty directory"; }
[ "$(listing)" = "./ckpt-000000000010.h5 ./ckpt-000000000020.h5 " ] || fail "the first run left $(listing)"

# Another seed, fewer steps: its checkpoints number below the earlier run's.
train other --seed 2 --max-steps 6 --checkpoint-every 3 --resume never
aside=$(sed -n "s|^resume: --resume never: the 2 checkpoints in $TMP/ck (the newest of step 20) moved to \\($TMP/ck/superseded-[0-9]\\{8\\}T[0-9]\\{6\\}Z\\); starting from scratch\$|\\1|p" "$TMP/other.log")
[ -n "$aside" ] || { cat "$TMP/other.log"; fail "no whole line saying where the 2 checkpoints went"; }
sub=${aside#"$TMP/ck/"}
want="./ckpt-000000000003.h5 ./ckpt-000000000006.h5 ./$sub/ckpt-000000000010.h5 ./$sub/ckpt-000000000020.h5 "
[ "$(listing)" = "$want" ] || fail "after --resume never: $(listing), expected $want"
echo "ok: the earlier run's 2 checkpoints moved to $aside; this run's steps 3 and 6 kept"

# The next start resumes this run, not the one set aside (whose seed would be refused).
train again --seed 2 --max-steps 9 --checkpoint-every 3
grep -q "^resumed from step 6 (restart 1): $(ckpt "$TMP/ck" 6)," "$TMP/again.log" || { cat "$TMP/again.log"; fail "no resume of step 6"; }
echo "ok: --resume auto then resumed this run's step 6"

# take FIRST LAST: the names superseded-<time>[-k], k from FIRST to LAST (0: none), made to exist for this
# second and the next nine (the run starts within them).
take() {
  t=$(date -u +%s)
  set -- "$1" "$2"
  for s in $(seq "$t" $((t + 9))); do
    d="$TMP/ck/superseded-$(date -u -d "@$s" +%Y%m%dT%H%M%SZ)"
    for k in $(seq "$1" "$2"); do
      if [ "$k" -eq 0 ]; then set -- "$@" "$d"; else set -- "$@" "$d-$k"; fi
    done
  done
  shift 2
  mkdir -p "$@"
}
# The name taken: the next one, "-1".
take 0 0
train suffix --seed 2 --max-steps 3 --resume never
grep -q "^resume: --resume never: the 2 checkpoints in $TMP/ck (the newest of step 9) moved to $TMP/ck/superseded-[0-9T]*Z-1; starting from scratch\$" \
  "$TMP/suffix.log" || { cat "$TMP/suffix.log"; fail "a taken name: not moved to its -1"; }
echo "ok: $(grep '^resume:' "$TMP/suffix.log")"

# Every name this second and the next nine could take, taken: 74, one line, nothing moved.
take 1 99
before=$(listing)
# shellcheck disable=SC2086
expect_fail 74 "^mnist_ddp: error: --checkpoint-dir $TMP/ck: --resume never: cannot create '$TMP/ck/superseded-[0-9T]*Z-99' to move 1 checkpoint into: File exists \\[rank 0/1 on " \
  run_np 1 "$MNIST_DDP" $common --seed 3 --max-steps 1 --resume never
[ "$(listing)" = "$before" ] || fail "a refused --resume never moved files: $(listing)"
