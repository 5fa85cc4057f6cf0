#!/usr/bin/env bash
# The main demo: export a GPT-style decoder from PyTorch, import it with
# weftc, summarize its tensors and ops, check the reference evaluator
# against PyTorch's output, then compile a training executable and train it
# on a token stream under weftrun, and look into its last checkpoint.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh --target weftc weft-eval weftrun weft-ckpt WeftRuntime WeftRuntimeMain WeftFormats

demo=build/demo
mkdir -p "$demo"
echo "== exporting examples/models gpt with PyTorch (opset 17)"
/usr/bin/python3 examples/models/export.py gpt --out "$demo"
echo "== weftc $demo/gpt.onnx --emit=weft"
build/bin/weftc "$demo/gpt.onnx" --emit=weft --summary -o "$demo/gpt.mlir"
# The IR is in the file; a summary of its ops reads better than 85 lines.
echo "   $demo/gpt.mlir: $(wc -l < "$demo/gpt.mlir") lines; ops:" \
  "$(grep -o 'weft\.[a-z_]*' "$demo/gpt.mlir" | grep -v 'weft\.\(param\|input\|buffer\|weights\)' \
     | sort | uniq -c | sort -rn | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')"
echo "== weft-eval: forward pass on $demo/input.npy"
build/bin/weft-eval "$demo/gpt.mlir" --input input="$demo/input.npy" -o "$demo/weft_out"
/usr/bin/python3 test/lib/compare_npy.py "$demo/weft_out.0.npy" "$demo/expected.npy" --rtol 1e-5
echo "== weftc $demo/gpt.onnx -o $demo/train (AdamW, warmup + cosine)"
build/bin/weftc "$demo/gpt.onnx" --optimizer adamw --clip-norm 1.0 \
  --lr-schedule cosine --warmup-steps 20 --total-steps 200 -o "$demo/train"
# A raw uint16 token stream (nanoGPT format) of a repeating pattern the
# model can learn: the loss should fall well below log(64) = 4.16.
/usr/bin/python3 -c "
import numpy as np
rng = np.random.default_rng(0)
pattern = rng.integers(0, 64, 37).astype(np.uint16)
np.tile(pattern, 400).tofile('$demo/tokens.bin')"
rm -rf "$demo/ckpt"  # a rerun trains afresh rather than resuming at step 200
echo "== weftrun $demo/train --data $demo/tokens.bin --steps 200 --lr 3e-3"
build/bin/weftrun --nproc-per-node 1 --max-restarts 1 \
  "$demo/train" --data "$demo/tokens.bin" --steps 200 --lr 3e-3 --log-every 40 \
  --metrics "$demo/metrics.jsonl" --checkpoint-dir "$demo/ckpt"
echo "== weft-ckpt info $demo/ckpt"
build/bin/weft-ckpt info "$demo/ckpt" | head -4
# The planner: the same GPT laid out by weftc for this machine's spec
# (examples/clusters/cpu-host.yaml; --cluster local measures the machine
# instead), its plan printed, drawn and kept beside the executable, then
# trained on as many ranks as the plan chose.
echo "== weftc $demo/gpt.onnx --cluster examples/clusters/cpu-host.yaml -o $demo/train-planned"
build/bin/weftc "$demo/gpt.onnx" --cluster examples/clusters/cpu-host.yaml \
  --optimizer adamw -o "$demo/train-planned"
ranks=$(/usr/bin/python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))['mesh']
print(m['dp'] * m['tp'] * m['pp'])" "$demo/train-planned.plan.json")
rm -rf "$demo/ckpt-planned"
echo "== weftrun --nproc-per-node $ranks $demo/train-planned (picture: $demo/train-planned.plan.svg)"
build/bin/weftrun --nproc-per-node "$ranks" --master-port 29599 \
  "$demo/train-planned" --data "$demo/tokens.bin" --steps 40 --lr 3e-3 --log-every 20 \
  --checkpoint-dir "$demo/ckpt-planned"
