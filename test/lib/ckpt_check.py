#!/usr/bin/python3
"""Load a `weft-ckpt export` file into the PyTorch model and check its loss.

  ckpt_check.py MODEL STATE.safetensors --x X.npy --y Y.npy --batch B
      --index I --metrics M.jsonl --step S [--rtol R]

Builds examples/models/export.py's MODEL (or test/lib/fidelity_models.py's
NAME for MODEL fidelity:NAME) with PyTorch's default
initialization, loads STATE with load_state_dict(strict=True) (every
parameter and buffer by name, nothing extra), computes the loss on samples
[I*B, (I+1)*B) of X, Y, and compares it with the loss Weft's metrics file
records for step S (computed with the same parameters on the same batch).
Prints "loss <value> matches step S" or fails.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "models"))
sys.path.insert(0, HERE)
import export  # noqa: E402
import exe_check  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("state")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--step", type=int, required=True)
    p.add_argument("--rtol", type=float, default=1e-6)
    args = p.parse_args()

    if args.model.startswith("fidelity:"):
        import fidelity_models
        model = fidelity_models.MODELS[args.model[len("fidelity:"):]][0]()
    else:
        model = export.MODELS[args.model]()
    state = {k: torch.from_numpy(np.array(exe_check.tensor_array(v, k, args.state)))
             for k, v in exe_check.read_safetensors(args.state).items()}
    model.load_state_dict(state, strict=True)
    model.train()
    x = torch.from_numpy(np.load(args.x))
    y = torch.from_numpy(np.load(args.y))
    lo, hi = args.index * args.batch, (args.index + 1) * args.batch
    with torch.no_grad():
        out = model(x[lo:hi])
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]),
                               y[lo:hi].reshape(-1)).item()
    weft = None
    with open(args.metrics) as f:
        for line in f:
            entry = json.loads(line)
            if entry.get("step") == args.step:
                weft = entry["loss"]
    if weft is None:
        sys.exit("error: %s has no step %d" % (args.metrics, args.step))
    if abs(loss - weft) > args.rtol * abs(weft):
        sys.exit("error: PyTorch's loss %.9g differs from Weft's %.9g at step %d"
                 % (loss, weft, args.step))
    print("loss %.6g matches step %d" % (loss, args.step))


if __name__ == "__main__":
    main()
