#!/usr/bin/python3
"""Export one model of test/lib/fidelity_models.py for training, with data.

  export_fidelity.py MODEL... --out DIR [--batch B] [--steps S] [--dropout P]

Builds each MODEL as test/lib/fidelity.py does (torch.manual_seed(0), PyTorch's
default initialization), exports it through python/weft_export.py (the
training graph, every parameter under its PyTorch name) with an input of
batch B (the global batch a step trains on), and writes S batches of the
model's own data (its make_batch, generator seed 1) to DIR:

  MODEL.onnx, MODEL.x.npy [S*B, ...], MODEL.y.npy [S*B, ...]

--dropout P sets every nn.Dropout's rate to P (the fidelity tests use 0,
the only rate at which two frameworks agree; Weft against Weft can compare
any rate).
"""

import argparse
import os
import sys
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import fidelity_models  # noqa: E402
import weft_export  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", metavar="MODEL",
                   choices=sorted(fidelity_models.MODELS))
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--dropout", type=float, default=None)
    args = p.parse_args()

    for name in args.models:
        export(name, args)


def export(name, args):
    ctor, make_batch, _ = fidelity_models.MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    if args.dropout is not None:
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = args.dropout
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(args.batch, g) for _ in range(args.steps)]
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, name)
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        weft_export.export(model, (batches[0][0],), base + ".onnx",
                           input_names=["input"], output_names=["output"])
    np.save(base + ".x.npy", torch.cat([x for x, _ in batches]).numpy())
    np.save(base + ".y.npy", torch.cat([y for _, y in batches]).numpy())
    print("%s: batch %d, %d steps -> %s.onnx" % (name, args.batch,
                                                args.steps, base))


if __name__ == "__main__":
    main()
