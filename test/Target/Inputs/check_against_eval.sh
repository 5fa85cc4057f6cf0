#!/bin/bash
# check_against_eval.sh WEFTC WEFT_EVAL PYTHON SRC DIR NAME PRECISION
#
# Two SGD-with-momentum steps of DIR/NAME.onnx, once with the reference
# evaluator (test/lib/weft_train_loop.py) and once with the executable weftc
# builds from the same training step; writes DIR/compare.txt.
set -e
weftc=$1 eval=$2 python=$3 src=$4 dir=$5 name=$6 precision=$7
"$python" "$src/test/Target/Inputs/random_batches.py" "$dir" "$dir/run" 2
"$weftc" "$dir/$name.onnx" --emit=train --optimizer sgd --momentum 0.9 \
    --precision "$precision" -o "$dir/train.mlir"
"$python" "$src/test/lib/weft_train_loop.py" "$dir/train.mlir" \
    --data "$dir/run" --steps 2 --lr 0.1 --weft-eval "$eval" > "$dir/eval.txt"
"$weftc" "$dir/train.mlir" -o "$dir/train" 2> "$dir/weftc.txt"
"$dir/train" --data "$dir/run/x.npy" --labels "$dir/run/y.npy" --steps 2 \
    --lr 0.1 --no-shuffle --checkpoint-dir "$dir/ckpt" \
    --metrics "$dir/metrics.jsonl" > "$dir/run.txt" 2>&1
"$python" "$src/test/Target/Inputs/compare_run.py" "$dir/ckpt/step-00000002" \
    "$dir/metrics.jsonl" "$dir/run/weft" --rtol 1e-3 --atol 1e-5 \
    > "$dir/compare.txt"
