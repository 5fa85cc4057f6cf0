#!/usr/bin/python3
"""Run a Weft training step for several steps with the reference evaluator.

Usage:
  weft_train_loop.py MODEL.mlir --data DIR --steps N --lr LR
      [--out DIR/weft] [--weft-eval PATH] [--fn train_step]
      [--inputs input,labels] [--expect-decrease]

Step s runs

  weft-eval MODEL.mlir --fn train_step --param-dir OUT --output-dir OUT
      --input input=DIR/input_<s>.npy --input labels=DIR/labels_<s>.npy
      --scalar step=<s> --scalar lr=<LR>

so it reads the parameters and optimizer state step s-1 wrote (step 0: the
weights file and zero state) and overwrites them. The loss and learning rate
of step s are kept as OUT/loss_<s>.npy and OUT/lr_<s>.npy; after the loop OUT
holds the final parameters as OUT/<name>.npy, the layout torch_reference.py
train writes to DIR/ref. OUT (default DIR/weft) is emptied first.

--expect-decrease fails unless every step's loss is below the previous one.
"""

import argparse
import os
import shutil
import subprocess
import sys

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mlir")
    p.add_argument("--data", required=True,
                   help="folder with input_<s>.npy, labels_<s>.npy")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", required=True, help="base learning rate")
    p.add_argument("--out", help="state and results folder (default DATA/weft)")
    p.add_argument("--weft-eval", default="weft-eval", help="weft-eval binary")
    p.add_argument("--fn", default="train_step")
    p.add_argument("--inputs", default="input,labels",
                   help="batch inputs, bound to DATA/<name>_<s>.npy")
    p.add_argument("--expect-decrease", action="store_true")
    args = p.parse_args(argv)

    out = args.out or os.path.join(args.data, "weft")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)

    losses = []
    for s in range(args.steps):
        cmd = [args.weft_eval, args.mlir, "--fn", args.fn,
               "--param-dir", out, "--output-dir", out,
               "--scalar", "step=%d" % s, "--scalar", "lr=%s" % args.lr]
        for name in args.inputs.split(","):
            cmd += ["--input", "%s=%s" % (name, os.path.join(args.data, "%s_%d.npy" % (name, s)))]
        result = subprocess.run(cmd)
        if result.returncode != 0:
            print("FAIL step %d: %s exited with %d" % (s, " ".join(cmd), result.returncode))
            return 1
        for name in ("loss", "lr"):
            shutil.copyfile(os.path.join(out, name + ".npy"),
                            os.path.join(out, "%s_%d.npy" % (name, s)))
        losses.append(float(np.load(os.path.join(out, "loss.npy"))))

    print("weft %s: %d steps, losses %s -> %s" % (
        args.fn, args.steps, " ".join("%.4f" % l for l in losses), out))
    if args.expect_decrease:
        rises = [s for s in range(1, len(losses)) if not losses[s] < losses[s - 1]]
        if rises:
            print("FAIL the loss does not decrease at step(s) %s"
                  % ", ".join(map(str, rises)))
            return 1
        print("OK the loss decreases at every step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
