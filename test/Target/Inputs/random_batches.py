#!/usr/bin/python3
"""random_batches.py MODEL_DIR OUT STEPS: batches for a classifier exported
with input.npy / expected.npy (zoo.py, export.py). Step s gets the exported
input and random class labels shaped like the output without its last
axis, as OUT/input_<s>.npy and OUT/labels_<s>.npy (weft_train_loop.py's
layout); OUT/x.npy and OUT/y.npy hold all steps back to back for a training
executable run with --no-shuffle."""

import os
import sys

import numpy as np

model_dir, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
x = np.load(os.path.join(model_dir, "input.npy"))
y = np.load(os.path.join(model_dir, "expected.npy"))
rng = np.random.default_rng(0)
os.makedirs(out, exist_ok=True)
labels = [rng.integers(0, y.shape[-1], size=y.shape[:-1]).astype(np.int64)
          for _ in range(steps)]
for s in range(steps):
    np.save(os.path.join(out, "input_%d.npy" % s), x)
    np.save(os.path.join(out, "labels_%d.npy" % s), labels[s])
np.save(os.path.join(out, "x.npy"), np.concatenate([x] * steps))
np.save(os.path.join(out, "y.npy"), np.concatenate(labels))
