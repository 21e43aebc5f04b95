#!/bin/sh
# The main job: 2 ranks, 1 epoch, at least 98.3% (PyTorch's DDP example reaches 98.45%). Then the saved
# model is checked by PyTorch (same accuracy from the same weights) and by mnist_ddp itself evaluating
# with 1 and 3 ranks (the same count of correct answers for every world size).
. "${abs_top_srcdir:-.}/tests/lib.sh"
set -e
need_data
run_np 2 "$MNIST_DDP" --data "$MNIST_DATA" --epochs 1 --save-model "$TMP/m.h5" --metrics "$TMP/m.json" \
  >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "training"; }
cat "$TMP/log"
acc=$(json_field "$TMP/m.json" summary test_accuracy)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.983) }' || fail "test accuracy $acc < 0.983 after one epoch"
correct=$(json_field "$TMP/m.json" epoch correct)
for np in 1 3; do
  run_np "$np" "$MNIST_DDP" --data "$MNIST_DATA" --epochs 0 --load-model "$TMP/m.h5" >"$TMP/eval$np" 2>&1 \
    || { cat "$TMP/eval$np"; fail "evaluation with $np ranks"; }
  grep -q "($correct/10000)" "$TMP/eval$np" || { cat "$TMP/eval$np"; fail "$np ranks do not get $correct/10000"; }
done
"$PYTHON3" "$abs_top_srcdir/tests/reference/eval_saved_model.py" "$TMP/m.h5" "$MNIST_DATA" "$correct" \
  || fail "PyTorch disagrees with mnist_ddp on the saved model"
echo "one epoch: test accuracy $acc ($correct/10000), confirmed by PyTorch and by 1 and 3 ranks"
