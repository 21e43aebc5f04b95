#!/bin/sh
# The full recipe (14 epochs, 2 ranks) reaches the published 99.1%.
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
RUN_TIMEOUT=1500 run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --epochs 14 --log-interval 200 --metrics "$TMP/m.json" \
  || fail "training"
acc=$(json_field "$TMP/m.json" summary test_accuracy)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.991) }' || fail "test accuracy $acc < 0.991 after 14 epochs"
echo "14 epochs: test accuracy $acc"
