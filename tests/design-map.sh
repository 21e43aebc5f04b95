#!/bin/sh
# docs/design.md's source map is complete: every C, CUDA and header file under src/ has its line
# ("- `PATH`: what it holds"), and every path the map names exists.
# shellcheck disable=SC2086 # the lists are printed word by word, on one line
src=${abs_top_srcdir:-.}
map=$src/docs/design.md
[ -f "$map" ] || { echo "FAIL: no $map"; exit 1; }
files=$(cd "$src" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
[ -n "$files" ] || { echo "FAIL: no sources found under $src"; exit 1; }
# shellcheck disable=SC2016 # backquotes, not an expansion
named=$(sed -n 's/^- `\([^`]*\)`: .*/\1/p' "$map" | sort)
missing=$(echo "$files" | grep -vxF -e "$named" || true)
gone=$(for n in $named; do [ -e "$src/$n" ] || echo "$n"; done)
twice=$(echo "$named" | uniq -d)
[ -z "$missing" ] || echo "FAIL: not in docs/design.md's source map:" $missing
[ -z "$gone" ] || echo "FAIL: in docs/design.md's source map but not in the tree:" $gone
[ -z "$twice" ] || echo "FAIL: named twice in docs/design.md's source map:" $twice
[ -z "$missing$gone$twice" ] || exit 1
echo "PASS: $(echo "$files" | wc -l) source files, each named once in docs/design.md's source map"
