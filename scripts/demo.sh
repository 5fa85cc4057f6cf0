#!/usr/bin/env bash
# The main demo: export a GPT-style decoder from PyTorch, compile it with
# weftc, print its IR and parameter count, then run the reference evaluator
# and compare with PyTorch's own output.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --target weftc weft-eval

demo=build/demo
mkdir -p "$demo"
echo "== exporting examples/models gpt with PyTorch (opset 17)"
/usr/bin/python3 examples/models/export.py gpt --out "$demo"
echo "== weftc $demo/gpt.onnx --emit=weft"
build/bin/weftc "$demo/gpt.onnx" --emit=weft --summary -o "$demo/gpt.mlir"
cat "$demo/gpt.mlir"
echo "== weft-eval: forward pass on $demo/input.npy"
build/bin/weft-eval "$demo/gpt.mlir" --input input="$demo/input.npy" -o "$demo/weft_out"
/usr/bin/python3 test/lib/compare_npy.py "$demo/weft_out.0.npy" "$demo/expected.npy" --rtol 1e-5
