#!/bin/sh
# tests/mutants.tsv still fits the code, checked in a second rather than by make mutants' half hour: every
# entry's literal text (\n and \t escapes, as tests/mutants.sh reads it) occurs exactly once in its file, every
# test it names exists (X, X.sh, X.py or X.c: a Check program's source), no id is listed twice and no field is
# empty. A refactor that moves mutated code then fails here, naming the entries to update. Like make mutants,
# it needs a git checkout: a release tarball need not hold every file the list names.
src=${abs_top_srcdir:-.}
list=$src/tests/mutants.tsv
[ -e "$src/.git" ] || { echo "SKIP: $src is not a git checkout (make mutants needs one)"; exit 77; }
[ -f "$list" ] || { echo "FAIL: no $list"; exit 1; }
bad=$(LC_ALL=C awk -F '\t' -v src="$src" '
  function unescape(s) { gsub(/\\n/, "\n", s); gsub(/\\t/, "\t", s); return s }
  function count(text, s,    n, at) {
    n = 0
    while ((at = index(text, s)) > 0) { n++; text = substr(text, at + length(s)) }
    return n
  }
  /^#/ || !NF { next }
  {
    id = $1
    if (seen[id]++) { print id ": listed twice"; next }
    if (NF < 5 || $1 == "" || $2 == "" || $3 == "" || $4 == "" || $5 == "") {
      print id ": an empty or missing field (id, file, literal, replacement, tests)"; next
    }
    path = src "/" $2
    if (!(path in text)) {
      t = ""; ok = 0
      while ((r = (getline line < path)) > 0) { t = t line "\n"; ok = 1 }
      close(path)
      if (r < 0) { print id ": no file " $2; next }
      text[path] = t
    }
    n = count(text[path], unescape($3))
    if (n != 1) print id ": the literal occurs " n " times in " $2 ", not once"
    k = split($5, tests, " ")
    for (i = 1; i <= k; i++) {
      f = src "/" tests[i]
      if (!(f in found))
        found[f] = system("test -f \"" f "\" || test -f \"" f ".sh\" || test -f \"" f ".py\" || test -f \"" f ".c\"") == 0
      if (!found[f]) print id ": no test " tests[i]
    }
  }' "$list")
n=$(grep -v -e '^#' -e '^$' "$list" | wc -l)
if [ -n "$bad" ]; then
  echo "FAIL: tests/mutants.tsv does not fit the tree (tests/mutants.sh would stop on it):"
  printf '%s\n' "$bad" | sed 's/^/  /'
  exit 1
fi
echo "PASS: $n mutants, each literal once in its file, each test present"
