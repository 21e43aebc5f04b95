#!/bin/sh
# One style, written by a formatter rather than by hand: every C, CUDA and header file of the source tree is
# exactly what clang-format makes of it with the committed .clang-format. clang-format versions differ in
# places, so the check needs the version CI has (Debian 12's clang-format 14); with another or none it is
# skipped, saying why. To format: clang-format -i --style=file:.clang-format FILE...
#
# Every line is also at most 120 columns, comments included: .clang-format keeps comments as written
# (ReflowComments: false), so a long comment line is rewrapped by hand. This part needs no clang-format.
src=${abs_top_srcdir:-.}
files=$(cd "$src" && find src tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
  -not -path 'tests/fuzz/work/*' -not -path 'tests/fuzz/build/*' -not -path 'tests/fuzz/corpus/*' | sort)
[ -n "$files" ] || { echo "FAIL: no sources found under $src"; exit 1; }
# Columns are characters, not bytes: the files hold UTF-8 (×, ≤). mawk's length() counts bytes in any locale,
# so in the C locale the continuation bytes (0x80-0xBF) are dropped first, which counts characters in any awk.
long=$(cd "$src" && LC_ALL=C awk '{
    s = $0
    gsub(/[\200-\277]/, "", s)
    if (length(s) > 120) printf "  %s:%d: %d columns\n", FILENAME, FNR, length(s)
  }' $files)
if [ -n "$long" ]; then
  echo "FAIL: lines longer than 120 columns (rewrap them by hand):"
  printf '%s\n' "$long"
  exit 1
fi
cf=$(command -v clang-format-14 || command -v clang-format) || {
  echo "SKIP: no clang-format (Debian: apt-get install clang-format); lines are within 120 columns"; exit 77; }
version=$("$cf" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$version" = 14 ] || {
  echo "SKIP: $cf is version $version; the style is checked with version 14; lines are within 120 columns"; exit 77; }
bad=""
for f in $files; do
  "$cf" --style="file:$src/.clang-format" --dry-run --Werror "$src/$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
  echo "FAIL: not formatted (clang-format -i --style=file:.clang-format FILE):$bad"
  exit 1
fi
echo "PASS: $(echo "$files" | wc -l) files formatted, lines within 120 columns"
