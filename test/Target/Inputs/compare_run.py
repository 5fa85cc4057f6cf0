#!/usr/bin/python3
"""Compare a training executable's run with torch_reference.py train.

Usage:
  compare_run.py CKPT_DIR METRICS.jsonl REF_DIR [--rtol 1e-4] [--atol 1e-6]

CKPT_DIR is the executable's final checkpoint (step-NNNNNNNN with
model.safetensors), METRICS the --metrics file, REF_DIR the reference's
ref/ folder: loss_<s>.npy per step and <name>.npy per parameter and
optimizer state. Every step's loss and every reference tensor present in
the checkpoint must match. Prints one summary line; exits 1 on a mismatch.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "BF16": None}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        data = blob[base + begin:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(data, dtype=DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"])
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("metrics")
    p.add_argument("ref")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-6)
    args = p.parse_args(argv)

    bad = []
    losses = [json.loads(line)["loss"] for line in open(args.metrics)]
    for s, loss in enumerate(losses):
        ref = float(np.load(os.path.join(args.ref, "loss_%d.npy" % s)))
        if not np.isclose(loss, ref, rtol=args.rtol, atol=args.atol):
            bad.append("loss of step %d: %.8g, reference %.8g" % (s, loss, ref))
    tensors = read_safetensors(os.path.join(args.checkpoint, "model.safetensors"))
    compared = 0
    for name, value in sorted(tensors.items()):
        path = os.path.join(args.ref, name + ".npy")
        if not os.path.exists(path):
            continue
        ref = np.load(path)
        compared += 1
        if ref.shape != value.shape:
            bad.append("%s: shape %s, reference %s" % (name, value.shape, ref.shape))
        elif not np.allclose(value, ref, rtol=args.rtol, atol=args.atol):
            err = np.max(np.abs(value.astype(np.float64) - ref))
            bad.append("%s: max abs difference %.3g" % (name, err))
    for line in bad:
        print("MISMATCH " + line)
    print("compared %d losses and %d tensors: %s"
          % (len(losses), compared, "mismatch" if bad else "ok"))
    return 1 if bad or not compared or not losses else 0


if __name__ == "__main__":
    sys.exit(main())
