#!/bin/bash
# Compile time of a GPT-2-small-sized training step (124M parameters,
# 12 layers, d_model 768, 12 heads, vocab 50257, T 1024, batch 1):
# import, training step, fused kernels, buffers, LLVM O2, object file with
# the weights embedded, and the executable (linked, weights appended).
#
# Usage: bench/compile_time.sh [BUILD_DIR] [WORK_DIR] [export_gpt.py flags]
#   e.g. bench/compile_time.sh build /tmp/weft-bench --block 256
# The exported model is reused when WORK_DIR already holds it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
work=${2:-/tmp/weft-bench}
shift $(( $# > 2 ? 2 : $# ))
mkdir -p "$work"
if [ ! -f "$work/gpt/gpt.onnx" ]; then
  /usr/bin/python3 "$src/bench/export_gpt.py" --out "$work/gpt" "$@"
fi
# An object file (the weights .incbin'd into it) and the default
# executable (one file: the weights appended to it after the link).
pattern="^weftc|wall|Total Execution|LLVM translation|Object emission|Embed weights|Link|Append weights|OneShotBufferize|FuseKernels"
for out in gpt.o train; do
  emit=$([ $out = gpt.o ] && echo --emit=obj || echo --emit=exe)
  echo "weftc $work/gpt/gpt.onnx $emit -o $work/$out --summary"
  /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KiB" \
    "$build/bin/weftc" "$work/gpt/gpt.onnx" $emit -o "$work/$out" \
    --summary --mlir-timing 2> "$work/compile-$out.txt"
  grep -E "$pattern" "$work/compile-$out.txt"
  ls -l "$work/$out"
done
