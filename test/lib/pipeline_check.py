#!/usr/bin/python3
"""Pipeline parallelism against one rank, on a model the pipeline tests do
not otherwise use: exports MODEL (test/lib/fidelity_models.py) as a user
would, compiles it with `weftc --mesh pp=R --micro-batches M --schedule S
--emit=partitioned`, runs the rank programs together (`weft-eval --ranks
R`) and the one-rank `@train_step` on the same global batch, and checks
that every returned array (loss, parameters, optimizer state) is bitwise
the same, but the gradient norm (a sum of the ranks' shares, added in
another order: within 1e-6 relative). Prints one line per schedule; exits
non-zero on a difference.

Usage: pipeline_check.py MODEL --out DIR --weftc W --weft-eval E
           [--mode train|eval] [--ranks 2] [--micro-batches 2]
           [--schedules 1f1b,zero-bubble]
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exe_check  # noqa: E402
import fidelity  # noqa: E402
import fidelity_models  # noqa: E402

BATCH = 4


def run(cmd, log):
    with open(log, "w") as f:
        if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode:
            sys.exit("%s failed; see %s" % (" ".join(cmd), log))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(fidelity_models.MODELS))
    p.add_argument("--out", required=True)
    p.add_argument("--weftc", required=True)
    p.add_argument("--weft-eval", required=True)
    p.add_argument("--mode", default="train", choices=["train", "eval"])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--micro-batches", type=int, default=2)
    p.add_argument("--schedules", default="1f1b,zero-bubble")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    ctor, make_batch, loss_kind = fidelity_models.MODELS[args.model]
    torch.manual_seed(0)
    model = ctor()
    g = torch.Generator().manual_seed(1)
    x, _ = make_batch(BATCH, g)
    onnx_path = os.path.join(args.out, "%s-%s.onnx" % (args.model, args.mode))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fidelity.export(copy.deepcopy(model), x, onnx_path, args.mode,
                        None, True, False)
    # One global batch: micro-batches x the exported batch.
    gx, gy = make_batch(BATCH * args.micro_batches, g)
    inputs = {"input": os.path.join(args.out, "x.npy"),
              "labels": os.path.join(args.out, "y.npy")}
    np.save(inputs["input"], gx.numpy())
    np.save(inputs["labels"], gy.numpy())
    binds = ["--input=%s=%s" % kv for kv in inputs.items()]
    binds += ["--scalar", "lr=0.01", "--scalar", "step=0"]

    status = 0
    for schedule in args.schedules.split(","):
        tag = "%s-%s-%s" % (args.model, args.mode, schedule)
        mlir = os.path.join(args.out, tag + ".mlir")
        run([args.weftc, onnx_path, "--loss", loss_kind, "--optimizer", "adamw",
             "--mesh", "pp=%d" % args.ranks, "--micro-batches",
             str(args.micro_batches), "--schedule", schedule,
             "--emit=partitioned", "-o", mlir],
            os.path.join(args.out, tag + ".weftc.log"))
        ranks_dir = os.path.join(args.out, tag + "-ranks")
        whole_dir = os.path.join(args.out, tag + "-whole")
        run([args.weft_eval, mlir, "--ranks", str(args.ranks), "--output-dir",
             ranks_dir] + binds, os.path.join(args.out, tag + ".ranks.log"))
        run([args.weft_eval, mlir, "--fn", "train_step", "--output-dir",
             whole_dir] + binds, os.path.join(args.out, tag + ".whole.log"))
        names = sorted(os.listdir(whole_dir))

        def same(n):
            if not os.path.exists(os.path.join(ranks_dir, n)):
                return False
            a = np.load(os.path.join(ranks_dir, n))
            b = np.load(os.path.join(whole_dir, n))
            if n == "grad_norm.npy":
                # Each rank sums its parameters' squares, then the ranks'
                # sums are added: the one-rank step adds them in argument
                # order.
                return a.shape == b.shape and exe_check.close(a, b, 1e-6) <= 1e-6
            return np.array_equal(a, b)
        different = [n for n in names if not same(n)]
        if different or not names:
            print("%s %s pp=%d %s: %d of %d arrays differ (%s)"
                  % (args.model, args.mode, args.ranks, schedule,
                     len(different), len(names), ", ".join(different[:5])))
            status = 1
        else:
            print("%s %s pp=%d %s: %d arrays, bitwise identical"
                  % (args.model, args.mode, args.ranks, schedule, len(names)))
    return status


if __name__ == "__main__":
    sys.exit(main())
