#!/usr/bin/python3
"""Export a GPT of any size (default: GPT-2 small) to ONNX for benchmarks.

Usage:
  /usr/bin/python3 bench/export_gpt.py --out DIR [--layers 12] [--embd 768]
      [--heads 12] [--vocab 50257] [--block 1024] [--batch 1]

Uses examples/models/export.py's nanoGPT-style GPT with its initializers
perturbed the same way, exports it with constant folding (as weftc users
do) and writes DIR/gpt.onnx, with the weights in DIR/gpt.onnx.data so that
models past protobuf's 2 GB limit export too. Random weights: this is for
compile-time and throughput measurements, not accuracy.
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "examples", "models"))
from export import GPT, make_params_distinct  # noqa: E402


def export_onnx(model, idx, out, constant_folding):
    """Exports `model` on input `idx` to OUT/gpt.onnx (opset 17), its
    weights in one external file beside it (OUT/gpt.onnx.data); returns
    the path."""
    import onnx
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "gpt.onnx")
    with torch.enable_grad():
        torch.onnx.export(model, (idx,), path, export_params=True,
                          opset_version=17,
                          do_constant_folding=constant_folding,
                          input_names=["input"], output_names=["output"])
    m = onnx.load(path)
    data = "gpt.onnx.data"
    if os.path.exists(os.path.join(out, data)):
        os.remove(os.path.join(out, data))
    onnx.save_model(m, path, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=data,
                    size_threshold=1024)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--block", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args(argv)

    start = time.time()
    torch.manual_seed(0)
    model = GPT(vocab=args.vocab, block_size=args.block, n_embd=args.embd,
                n_head=args.heads, n_layer=args.layers)
    make_params_distinct(model, 0)
    model.eval()
    idx = torch.randint(0, args.vocab, (args.batch, args.block),
                        generator=torch.Generator().manual_seed(1))
    path = export_onnx(model, idx, args.out, constant_folding=True)
    params = sum(t.numel() for t in model.parameters())
    print("gpt: %d layers, d_model %d, %d heads, vocab %d, T %d, batch %d: "
          "%.1fM parameters -> %s (%.0f s)"
          % (args.layers, args.embd, args.heads, args.vocab, args.block,
             args.batch, params / 1e6, path, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
