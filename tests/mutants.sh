#!/bin/sh
# Mutation testing (make mutants): applies each semantic mutation of tests/mutants.tsv, one at a time, to a
# scratch copy of the tree, rebuilds, runs the tests named for it, and reports which mutants the tests
# kill. A mutant is a literal edit that must match its file exactly once, so a list that no longer fits the
# code fails loudly instead of testing nothing. Exit 0 only when the unmutated tree passes and every mutant
# is killed or listed as equivalent (with the reason why no test can tell it apart).
#   MUTANTS="id id ..."  run only these;   MUTANT_TIMEOUT  seconds per test run (default 900)
#   MUTANT_WORK=DIR      keep the scratch tree there (default: a temporary directory, removed at the end)
set -u
src=${abs_top_srcdir:?run through make mutants, or export abs_top_srcdir}

py=${PYTHON3:-python3}
work=${MUTANT_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/mnist_ddp_mutants.XXXXXX")}
[ -n "${MUTANT_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
tree=$work/tree
list=$tree/tests/mutants.tsv # the copy: edits made while it runs do not mix in
log=$work/log

say() { printf '%s\n' "$*"; }
die() { say "mutants: $*" >&2; exit 1; }

# Two entries under one name: MUTANTS= could pick either, and a report could not say which ran.
dup=$(grep -v -e '^#' -e '^$' "$src/tests/mutants.tsv" | cut -f1 | sort | uniq -d | tr '\n' ' ')
[ -z "$dup" ] || die "tests/mutants.tsv names these mutants twice: $dup"
# An empty field: read's tab splitting would close it up and shift the fields after it (the tests into the
# replacement), so the mutant would fail to build and count as broken rather than say why.
empty=$(awk -F '\t' '!/^#/ && NF && ($1 == "" || $2 == "" || $3 == "" || $4 == "" || $5 == "") { print $1 }' \
  "$src/tests/mutants.tsv" | tr '\n' ' ')
[ -z "$empty" ] || die "tests/mutants.tsv has an empty field (a replacement is never empty) in: $empty"

# The scratch tree: what git tracks or would track, plus the verified MNIST cache (keeps it offline).
copy_tree() {
  rm -rf "$tree"
  mkdir -p "$tree" || die "cannot create $tree"
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar cf -) | (cd "$tree" && tar xf -) ||
    die "cannot copy $src (a git checkout is needed)"
  if [ -d "${abs_top_builddir:-$src}/data/cache" ]; then
    mkdir -p "$tree/data" && cp -R "${abs_top_builddir:-$src}/data/cache" "$tree/data/"
  fi
  say "mutants: building a scratch copy in $tree"
  (cd "$tree" && autoreconf -fi && ./configure && make -j"$(nproc)" && make data) >"$log.build" 2>&1 ||
    { tail -n 30 "$log.build"; die "the scratch copy does not build"; }
}

# mutate FILE FROM TO: literal replacement (\n and \t escapes) that must match exactly once.
mutate() {
  "$py" - "$tree/$1" "$2" "$3" <<'PY'
import sys
path, old, new = sys.argv[1], *(a.replace("\\n", "\n").replace("\\t", "\t") for a in sys.argv[2:4])
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"matches {n} times in {path}, not once: {old!r}")
open(path, "w").write(text.replace(old, new))
PY
}

# run_tests TESTS [SECONDS]: 0 when they all pass within SECONDS (default MUTANT_TIMEOUT). The build is part
# of it: a mutant must compile to count.
run_tests() (
  cd "$tree" || exit 2
  if ! make -j"$(nproc)" >"$log.make" 2>&1; then echo "mutants: mutant does not build"; exit 2; fi
  timeout -k 10 "${2:-${MUTANT_TIMEOUT:-900}}" make check TESTS="$1"
) >"$log.test" 2>&1

# ran_all TESTS: every test named has a result line in the last run (a test that no longer exists, or a
# harness that stopped early, must not pass for a kill).
ran_all() {
  for t in $1; do
    grep -Eq "^(PASS|FAIL|ERROR|SKIP|XFAIL|XPASS): $t\$" "$log.test" || { echo "mutants: $t did not run" >>"$log.test"; return 1; }
  done
}

selected() {
  [ -z "${MUTANTS:-}" ] && return 0
  case " $MUTANTS " in *" $1 "*) return 0 ;; esac
  return 1
}

copy_tree
all_tests=$(grep -v '^#' "$list" | awk -F '\t' -v only=" ${MUTANTS:-} " \
  'NF >= 5 && (only == "  " || index(only, " " $1 " ")) { print $5 }' | tr ' ' '\n' | sort -u | tr '\n' ' ')
say "mutants: unmutated tree against $all_tests"
# The unmutated run holds every named test at once: MUTANT_TIMEOUT for each of them.
{ run_tests "$all_tests" $((${MUTANT_TIMEOUT:-900} * $(echo "$all_tests" | wc -w))) </dev/null && ran_all "$all_tests"; } ||
  { tail -n 40 "$log.test"; die "the unmutated tree fails its tests: no mutant can be judged"; }

killed=0 survived=0 equivalent=0 broken=0 total=0 survivors=""
tab=$(printf '\t')
while IFS="$tab" read -r id file from to tests why; do
  case $id in ''|'#'*) continue ;; esac
  selected "$id" || continue
  total=$((total + 1))
  cp "$tree/$file" "$work/orig"
  if ! err=$(mutate "$file" "$from" "$to" 2>&1); then
    say "BROKEN   $id: $err"; broken=$((broken + 1)); continue
  fi
  t0=$(date +%s)
  if run_tests "$tests" </dev/null; then verdict=survived; else verdict=killed; fi
  grep -q '^mutants: mutant does not build' "$log.test" && verdict=broken
  ran_all "$tests" || verdict=broken
  cp "$work/orig" "$tree/$file"
  secs=$(($(date +%s) - t0))
  case $verdict in
    killed) killed=$((killed + 1)); say "killed   $id (${secs}s) by $(grep -E '^(FAIL|ERROR):' "$log.test" | sed 's/^[A-Z]*: //' | tr '\n' ' ')" ;;
    broken) broken=$((broken + 1)); say "BROKEN   $id: $(grep -m1 '^mutants:' "$log.test")"; grep -m3 'error' "$log.make" ;;
    survived)
      if [ -n "$why" ]; then
        equivalent=$((equivalent + 1)); say "equiv    $id (${secs}s): $why"
      else
        survived=$((survived + 1)); survivors="$survivors $id"; say "SURVIVED $id (${secs}s): $file: '$from' -> '$to' passes $tests"
      fi ;;
  esac
done <"$list"

judged=$((killed + survived))
rate=$(awk -v k="$killed" -v j="$judged" 'BEGIN { printf "%.0f", j ? 100 * k / j : 0 }')
say "mutants: $total tried: $killed killed, $survived survived, $equivalent equivalent, $broken broken; kill rate $rate% of non-equivalent mutants"
[ "$((survived + broken))" -eq 0 ] || die "survivors:${survivors:- none}; broken: $broken (fix tests/mutants.tsv or add tests)"
