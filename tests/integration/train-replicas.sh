#!/bin/sh
# Replicas stay identical: every rank reports the fingerprint of its parameters after training
# (--verbose makes every rank talk); 2 and 4 ranks must each agree bit for bit.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
for np in 2 4; do
  run_np "$np" "$MNIST_DDP" --data "$MNIST_DATA" --max-steps 30 --epochs 1 --verbose >"$TMP/log$np" 2>&1 \
    || { cat "$TMP/log$np"; fail "$np ranks"; }
  n=$(grep -c 'replica fingerprint' "$TMP/log$np" || true)
  [ "$n" -eq "$np" ] || { cat "$TMP/log$np"; fail "$np ranks: $n fingerprints reported"; }
  distinct=$(grep 'replica fingerprint' "$TMP/log$np" | awk '{print $NF}' | sort -u | wc -l)
  [ "$distinct" -eq 1 ] || { grep 'replica fingerprint' "$TMP/log$np"; fail "$np ranks: replicas differ"; }
  echo "$np ranks: identical replicas ($(grep -m1 'replica fingerprint' "$TMP/log$np" | awk '{print $NF}'))"
done
